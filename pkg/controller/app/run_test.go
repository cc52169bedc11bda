package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

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
