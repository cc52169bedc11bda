//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRestartOnSameStateKeepsObjects stops every part, starts again on the same state
// directory (etcd data and PKI reused, new ports) and finds the objects again.
func TestRestartOnSameStateKeepsObjects(t *testing.T) {
	applyExamples(t)
	kubectlIn(t, database("e2e-survivor", "mongodb", "8.0", 2), "apply", "-f", "-")
	before, err := clientset(t).ExampleV1().Databases("production").Get(context.Background(), "e2e-survivor", metav1.GetOptions{})
	require.NoError(t, err)

	cluster.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	started := time.Now()
	cluster, err = startCluster(ctx)
	require.NoError(t, err)
	t.Logf("measured: control plane restarted on its state in %v", time.Since(started).Round(100*time.Millisecond))

	after, err := clientset(t).ExampleV1().Databases("production").Get(ctx, "e2e-survivor", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, before.UID, after.UID)
	require.Equal(t, before.Spec, after.Spec)
	out := kubectl(t, "get", "db", "-A")
	require.Contains(t, out, "my-database")
	require.Contains(t, out, "e2e-survivor")
	_, err = os.Stat(filepath.Join(cluster.Dir(), "etcd"))
	require.NoError(t, err)
}

// TestCreatingExamplesAgainKeepsWhatTheUserChanged is what `make run` does on
// every start: the examples are created only where missing, so a scaled
// example keeps its replicas across restarts.
func TestCreatingExamplesAgainKeepsWhatTheUserChanged(t *testing.T) {
	applyExamples(t)
	t.Cleanup(func() { applyExamples(t) }) // back to the example's 3 replicas for other tests
	kubectl(t, "scale", "db/my-database", "-n", "production", "--replicas=4")
	require.NoError(t, cluster.CreateMissing(context.Background(), filepath.Join(root, "artifacts", "examples")))
	got, err := clientset(t).ExampleV1().Databases("production").Get(context.Background(), "my-database", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(4), *got.Spec.Replicas)
}
