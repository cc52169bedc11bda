package localcluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/flowcontrol"
)

// testCluster is a Cluster with no part started, whose Logf lines are kept.
type testCluster struct {
	*Cluster
	mu    sync.Mutex
	lines []string
}

func newTestCluster(t *testing.T) *testCluster {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(logDir(dir), 0o700))
	tc := &testCluster{}
	tc.Cluster = &Cluster{
		cfg: Config{Dir: dir, Timeout: 10 * time.Second, Logf: func(format string, args ...any) {
			tc.mu.Lock()
			defer tc.mu.Unlock()
			tc.lines = append(tc.lines, fmt.Sprintf(format, args...))
		}},
		backoff: newRestartBackoff(),
		stopped: make(chan struct{}),
	}
	t.Cleanup(tc.Stop)
	return tc
}

func (tc *testCluster) log() string {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return strings.Join(tc.lines, "\n")
}

func TestAChildKilledFromOutsideIsStartedAgain(t *testing.T) {
	c := newTestCluster(t)
	_, err := c.start("sleeper", "/bin/sleep", []string{"600"})
	require.NoError(t, err)
	first := c.PID("sleeper")
	require.NotZero(t, first)

	require.NoError(t, c.Signal("sleeper", syscall.SIGKILL))
	require.Eventually(t, func() bool {
		pid := c.PID("sleeper")
		return pid != 0 && pid != first
	}, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, 1, c.Restarts("sleeper"))
	require.Contains(t, c.log(), "exited: signal: killed")
	require.Contains(t, c.log(), "restarting in 1s (restart 1")
	logged, err := os.ReadFile(c.running("sleeper").logPath)
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(logged), "/bin/sleep 600"), "each run appends its command line:\n%s", logged)
	require.Contains(t, string(logged), "exited: signal: killed")
}

// The backoff doubles: the first restart after 1s, the second after 2s more.
func TestAChildThatKeepsExitingIsStartedAgainWithBackoff(t *testing.T) {
	c := newTestCluster(t)
	started := time.Now()
	_, err := c.start("crasher", "/bin/sh", []string{"-c", "exit 3"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.Restarts("crasher") >= 2 }, time.Minute, 50*time.Millisecond,
		"fewer than 2 restarts in a minute")
	t.Logf("restarted twice %v after the first start", time.Since(started).Round(100*time.Millisecond))
	require.Contains(t, c.log(), "exited: exit status 3")
	require.Contains(t, c.log(), "restarting in 1s (restart 1")
	require.Contains(t, c.log(), "restarting in 2s (restart 2")
}

// supervisorReturned waits until the supervisor of comp's current run has returned: from
// then on nothing restarts comp. It fails the test after a minute.
func supervisorReturned(t *testing.T, done chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the supervisor still runs a minute later")
	}
}

// component is the child called name; read its fields under tc.Cluster.mu.
func (tc *testCluster) component(t *testing.T, name string) *component {
	t.Helper()
	tc.Cluster.mu.Lock()
	defer tc.Cluster.mu.Unlock()
	comp := tc.componentLocked(name)
	require.NotNil(t, comp, name)
	return comp
}

// supervised is the channel the supervisor of name's current run closes when it returns.
func (tc *testCluster) supervised(t *testing.T, name string) chan struct{} {
	comp := tc.component(t, name)
	tc.Cluster.mu.Lock()
	defer tc.Cluster.mu.Unlock()
	return comp.supervised
}

func TestStopStopsEveryChildForGood(t *testing.T) {
	c := newTestCluster(t)
	_, err := c.start("sleeper", "/bin/sleep", []string{"600"})
	require.NoError(t, err)
	comp := c.component(t, "sleeper")
	supervised := c.supervised(t, "sleeper")
	p := c.running("sleeper")
	c.Stop()
	require.True(t, p.hasExited())
	select {
	case <-supervised:
	default:
		t.Fatal("Stop returned while the supervisor still ran")
	}
	c.Cluster.mu.Lock()
	last, restarts := comp.proc, comp.restarts
	c.Cluster.mu.Unlock()
	require.Same(t, p, last, "started again after Stop")
	require.Zero(t, restarts)
	require.Error(t, c.StartComponent(context.Background(), "sleeper"))
}

// A child that exited and waits for its restart is not started again by a Stop during the
// backoff (an hour here, so that Stop comes during it).
func TestStopDuringTheRestartBackoffStartsNothing(t *testing.T) {
	c := newTestCluster(t)
	c.backoff = flowcontrol.NewBackOff(time.Hour, time.Hour)
	_, err := c.start("crasher", "/bin/sh", []string{"-c", "exit 3"})
	require.NoError(t, err)
	comp := c.component(t, "crasher")
	supervised := c.supervised(t, "crasher")
	require.Eventually(t, func() bool { return strings.Contains(c.log(), "restarting in 1h0m0s (restart 1") },
		time.Minute, 10*time.Millisecond, "the supervisor never saw the exit")
	c.Stop()
	select {
	case <-supervised:
	default:
		t.Fatal("Stop returned while the supervisor still ran")
	}
	c.Cluster.mu.Lock()
	restarts := comp.restarts
	c.Cluster.mu.Unlock()
	require.Zero(t, restarts, c.log())
}

func TestKilledOrStoppedOnPurposeStaysStoppedUntilStartedAgain(t *testing.T) {
	c := newTestCluster(t)
	_, err := c.start("sleeper", "/bin/sleep", []string{"600"})
	require.NoError(t, err)
	require.Error(t, c.StartComponent(context.Background(), "sleeper"), "it runs")

	for _, stop := range []func(string) error{c.Kill, c.StopComponent} {
		supervised := c.supervised(t, "sleeper")
		require.NoError(t, stop("sleeper"))
		require.Error(t, stop("sleeper"), "it does not run")
		supervisorReturned(t, supervised)
		require.Zero(t, c.PID("sleeper"))
		require.NoError(t, c.StartComponent(context.Background(), "sleeper"))
		require.NotZero(t, c.PID("sleeper"))
	}
	require.Zero(t, c.Restarts("sleeper"))
	require.Error(t, c.StartComponent(context.Background(), "never-started"))
}
