package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	dbfake "example.com/database-apiserver/pkg/generated/clientset/versioned/fake"
)

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// waitOK polls url until it answers 200 OK.
func waitOK(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body, err := get(url)
		if err == nil && code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %s %v", url, code, body, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRunLeadsServesProbesAndReleasesTheLease runs the whole command's Run on fake clientsets:
// it takes the Lease, reports ready once the caches synced, serves metrics and pprof, and on
// shutdown returns nil and gives the Lease up for the next replica.
func TestRunLeadsServesProbesAndReleasesTheLease(t *testing.T) {
	o := parse(t, "--health-probe-bind-address="+freeAddress(t), "--profiling",
		"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=200ms")
	require.NoError(t, o.Validate())
	kube := kubefake.NewClientset()
	c := &Config{Options: o, Kube: kube, Databases: dbfake.NewClientset(), LeaderElection: kube, Identity: "test_1"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	base := "http://" + o.HealthProbeBindAddress
	waitOK(t, base+"/readyz")
	require.Eventually(t, func() bool {
		lease, err := kube.CoordinationV1().Leases("database-system").Get(ctx, "database-controller", metav1.GetOptions{})
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == "test_1"
	}, 30*time.Second, 100*time.Millisecond, "the Lease is never taken")

	code, body, err := get(base + "/healthz?verbose")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "leaderElection ok")
	code, body, err = get(base + "/metrics")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `workqueue_adds_total{name="database-controller"}`)
	require.Contains(t, body, `leader_election_master_status{name="database-controller"} 1`)
	code, _, err = get(base + "/debug/pprof/")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	lease, err := kube.CoordinationV1().Leases("database-system").Get(context.Background(), "database-controller", metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "", "the Lease is released")
	_, _, err = get(base + "/healthz")
	require.Error(t, err, "the health server is shut down")
}

// TestRunCampaignsAgainAfterLosingTheLease plays a kube-apiserver outage longer than the renew
// deadline, as seen by leader election: every Lease request fails. The leader stops its
// workers (a Database created meanwhile is not reconciled), Run does not return, and once the
// Lease can be written again the process leads again and reconciles what it missed.
func TestRunCampaignsAgainAfterLosingTheLease(t *testing.T) {
	o := parse(t, "--health-probe-bind-address="+freeAddress(t),
		"--leader-elect-lease-duration=2s", "--leader-elect-renew-deadline=1s", "--leader-elect-retry-period=200ms")
	require.NoError(t, o.Validate())
	kube := kubefake.NewClientset()
	var outage atomic.Bool
	kube.PrependReactor("*", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if outage.Load() {
			return true, nil, apierrors.NewServiceUnavailable("kube-apiserver is down")
		}
		return false, nil, nil
	})
	databases := dbfake.NewClientset()
	// A worker's first write to a Database is its finalizer: the names written so far.
	var written sync.Map
	databases.PrependReactor("update", "databases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		written.Store(a.(clienttesting.UpdateAction).GetObject().(metav1.Object).GetName(), true)
		return false, nil, nil
	})
	reconciled := func(name string) func() bool {
		return func() bool {
			_, ok := written.Load(name)
			return ok
		}
	}

	c := &Config{Options: o, Kube: kube, Databases: databases, LeaderElection: kube, Identity: "test_1"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	base := "http://" + o.HealthProbeBindAddress
	masterStatus := func(value string) func() bool {
		return func() bool {
			_, body, err := get(base + "/metrics")
			return err == nil && strings.Contains(body, `leader_election_master_status{name="database-controller"} `+value+"\n")
		}
	}
	create := func(name string) { // the fake's Create needs an OpenAPI schema, its tracker not
		require.NoError(t, databases.Tracker().Add(&examplev1.Database{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       examplev1.DatabaseSpec{Engine: examplev1.EnginePostgreSQL, Version: "16"},
		}))
	}
	require.Eventually(t, masterStatus("1"), 30*time.Second, 100*time.Millisecond, "never leads")
	create("before")
	require.Eventually(t, reconciled("before"), 30*time.Second, 100*time.Millisecond)

	outage.Store(true)
	require.Eventually(t, masterStatus("0"), 30*time.Second, 100*time.Millisecond, "still leads without renewing")
	create("during")
	require.Never(t, reconciled("during"), 2*time.Second, 100*time.Millisecond, "a worker runs without the Lease")
	select {
	case err := <-done:
		t.Fatalf("Run returned after losing the Lease: %v", err)
	default:
	}

	outage.Store(false)
	require.Eventually(t, reconciled("during"), 30*time.Second, 100*time.Millisecond, "never reconciled after the outage")
	require.True(t, masterStatus("1")())
	lease, err := kube.CoordinationV1().Leases("database-system").Get(ctx, "database-controller", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "test_1", *lease.Spec.HolderIdentity)
	waitOK(t, base+"/readyz")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
