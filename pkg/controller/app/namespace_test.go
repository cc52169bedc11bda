package app

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	dbfake "example.com/database-apiserver/pkg/generated/clientset/versioned/fake"
)

// actionLog records "verb resource namespace/name" of every request a fake clientset serves.
type actionLog struct {
	mu      sync.Mutex
	actions []clienttesting.Action
}

func (l *actionLog) record(a clienttesting.Action) (bool, runtime.Object, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.actions = append(l.actions, a.DeepCopy())
	return false, nil, nil
}

// reads returns "verb resource in namespace" of every list and watch recorded so far.
func (l *actionLog) reads() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, a := range l.actions {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			out = append(out, fmt.Sprintf("%s %s in %q", a.GetVerb(), a.GetResource().Resource, a.GetNamespace()))
		}
	}
	return out
}

func TestNamespaceNamesTheLeaseAfterIt(t *testing.T) {
	o := parse(t, "--namespace=a")
	o.Complete()
	require.NoError(t, o.Validate())
	require.Equal(t, "a", o.Namespace)
	require.Equal(t, "database-system", o.LeaderElection.ResourceNamespace)
	require.Equal(t, "database-controller-a", o.LeaderElection.ResourceName)

	o = parse(t, "--namespace=a", "--leader-elect-resource-name=mine")
	o.Complete()
	require.Equal(t, "mine", o.LeaderElection.ResourceName, "a Lease name given is kept")

	o = parse(t)
	o.Complete()
	require.Equal(t, "database-controller", o.LeaderElection.ResourceName, "unset, the Lease is today's")

	o = parse(t, "--namespace=Not_A_Namespace")
	require.ErrorContains(t, o.Validate(), `--namespace "Not_A_Namespace"`)
}

// TestRunWithNamespaceListsAndWatchesOnlyThere runs the controller with --namespace=a on fake
// clientsets: every list and watch it issues, of every kind (claims and Events included), is
// in namespace a, none cluster-wide; it reconciles a Database of a and never one of b; and it
// leads on the Lease database-system/database-controller-a.
func TestRunWithNamespaceListsAndWatchesOnlyThere(t *testing.T) {
	o := parse(t, "--namespace=a", "--secure-port=0",
		"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=200ms")
	o.Complete()
	require.NoError(t, o.Validate())
	kube := kubefake.NewClientset()
	databases := dbfake.NewClientset()
	var kubeLog, dbLog actionLog
	kube.PrependReactor("*", "*", kubeLog.record)
	kube.PrependWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		kubeLog.record(a)
		return false, nil, nil
	})
	databases.PrependReactor("*", "*", dbLog.record)
	databases.PrependWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		dbLog.record(a)
		return false, nil, nil
	})
	var written sync.Map
	databases.PrependReactor("update", "databases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		m := a.(clienttesting.UpdateAction).GetObject().(metav1.Object)
		written.Store(m.GetNamespace()+"/"+m.GetName(), true)
		return false, nil, nil
	})
	for _, ns := range []string{"a", "b"} {
		require.NoError(t, databases.Tracker().Add(&examplev1.Database{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
			Spec:       examplev1.DatabaseSpec{Engine: examplev1.EnginePostgreSQL, Version: "16"},
		}))
	}
	c := &Config{Options: o, Kube: kube, Databases: databases, LeaderElection: kube, Identity: "test_1"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	require.Eventually(t, func() bool { _, ok := written.Load("a/db"); return ok },
		30*time.Second, 100*time.Millisecond, "the Database of a is never reconciled")
	lease, err := kube.CoordinationV1().Leases("database-system").Get(ctx, "database-controller-a", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "test_1", *lease.Spec.HolderIdentity)
	stopRun(t, cancel, done)

	_, reconciledB := written.Load("b/db")
	require.False(t, reconciledB, "a Database of b is reconciled")
	kubeReads, dbReads := kubeLog.reads(), dbLog.reads()
	// Every kind the controller caches, each listed and watched in a alone.
	for _, resource := range []string{"statefulsets", "services", "secrets", "persistentvolumeclaims",
		"poddisruptionbudgets", "configmaps", "pods", "events"} {
		require.Contains(t, kubeReads, `list `+resource+` in "a"`)
		require.Contains(t, kubeReads, `watch `+resource+` in "a"`)
	}
	require.Contains(t, dbReads, `list databases in "a"`)
	require.Contains(t, dbReads, `watch databases in "a"`)
	for _, read := range append(kubeReads, dbReads...) {
		require.Regexp(t, ` in "a"$`, read, "a list or watch outside namespace a")
	}
}
