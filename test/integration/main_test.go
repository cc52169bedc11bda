// Package integration runs database-apiserver in-process on a real embedded
// etcd and exercises it through the generated clientset and raw HTTP.
package integration

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/generated/clientset/versioned"
	"example.com/database-apiserver/test/integration/framework"
)

var server *framework.TestServer

func TestMain(m *testing.M) {
	var err error
	server, err = framework.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting database-apiserver: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	server.Stop()
	os.Exit(code)
}

// warningRecorder keeps the Warning headers the server sent.
type warningRecorder struct {
	mu       sync.Mutex
	messages []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, message string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.messages = append(w.messages, message)
}

func (w *warningRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.messages...)
}

// clientFor returns a clientset whose Warning headers go to the returned recorder.
func clientFor(t *testing.T) (versioned.Interface, *warningRecorder) {
	t.Helper()
	cfg := rest.CopyConfig(server.ClientConfig)
	warnings := &warningRecorder{}
	cfg.WarningHandler = warnings
	client, err := versioned.NewForConfig(cfg)
	require.NoError(t, err)
	return client, warnings
}

// namespace returns a namespace name unique to the test. Without
// NamespaceLifecycle the namespace need not exist.
func namespace(t *testing.T) string {
	return fmt.Sprintf("it-%d", nextNamespace())
}

var (
	nsMu sync.Mutex
	nsN  int
)

func nextNamespace() int {
	nsMu.Lock()
	defer nsMu.Unlock()
	nsN++
	return nsN
}

// newDatabase returns a valid Database; mutate it in the test.
func newDatabase(ns, name string, engine examplev1.Engine, version string) *examplev1.Database {
	return &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: examplev1.DatabaseSpec{
			Engine:   engine,
			Version:  version,
			Replicas: ptr.To[int32](1),
			Storage:  "10Gi",
		},
	}
}

func create(t *testing.T, client versioned.Interface, db *examplev1.Database) *examplev1.Database {
	t.Helper()
	out, err := client.ExampleV1().Databases(db.Namespace).Create(context.Background(), db, metav1.CreateOptions{})
	require.NoError(t, err)
	return out
}
