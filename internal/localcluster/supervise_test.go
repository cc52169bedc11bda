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

func TestAChildThatKeepsExitingIsStartedAgainWithBackoff(t *testing.T) {
	c := newTestCluster(t)
	_, err := c.start("crasher", "/bin/sh", []string{"-c", "exit 3"})
	require.NoError(t, err)
	// Restarts after 1s, then 2s more, then 4s more: two in the first 5 seconds.
	time.Sleep(5 * time.Second)
	n := c.Restarts("crasher")
	require.GreaterOrEqual(t, n, 1)
	require.LessOrEqual(t, n, 2, c.log())
	require.Contains(t, c.log(), "exited: exit status 3")
	if n == 2 {
		require.Contains(t, c.log(), "restarting in 2s (restart 2")
	}
}

func TestStopStopsEveryChildForGood(t *testing.T) {
	c := newTestCluster(t)
	_, err := c.start("sleeper", "/bin/sleep", []string{"600"})
	require.NoError(t, err)
	p := c.running("sleeper")
	c.Stop()
	require.True(t, p.hasExited())
	time.Sleep(1500 * time.Millisecond) // past the first restart's backoff
	require.Zero(t, c.PID("sleeper"))
	require.Zero(t, c.Restarts("sleeper"))
	require.Error(t, c.StartComponent(context.Background(), "sleeper"))
}

func TestKilledOrStoppedOnPurposeStaysStoppedUntilStartedAgain(t *testing.T) {
	c := newTestCluster(t)
	_, err := c.start("sleeper", "/bin/sleep", []string{"600"})
	require.NoError(t, err)
	require.Error(t, c.StartComponent(context.Background(), "sleeper"), "it runs")

	for _, stop := range []func(string) error{c.Kill, c.StopComponent} {
		require.NoError(t, stop("sleeper"))
		require.Error(t, stop("sleeper"), "it does not run")
		time.Sleep(1500 * time.Millisecond) // past the first restart's backoff
		require.Zero(t, c.PID("sleeper"))
		require.NoError(t, c.StartComponent(context.Background(), "sleeper"))
		require.NotZero(t, c.PID("sleeper"))
	}
	require.Zero(t, c.Restarts("sleeper"))
	require.Error(t, c.StartComponent(context.Background(), "never-started"))
}
