package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeJoin records what a laterJoin did, in order.
type fakeJoin struct {
	mu     sync.Mutex
	events []string
	logs   []string
}

func (f *fakeJoin) record(event string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, event)
}

func (f *fakeJoin) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

func (f *fakeJoin) logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

func (f *fakeJoin) laterJoin(build, join func(context.Context) error) *laterJoin {
	return &laterJoin{
		build: func(ctx context.Context) error {
			f.record("build started")
			err := build(ctx)
			f.record(fmt.Sprintf("build returned %v", err))
			return err
		},
		join: func(ctx context.Context) error {
			f.record("join")
			return join(ctx)
		},
		giveUp: func(why string) { f.record("give up: " + why) },
		logf:   f.logf,
	}
}

// The build holds until the test has seen it start; the join reports whether the build had
// returned when the join was called.
func TestLaterJoinStartsTheNodeOnlyAfterTheBuild(t *testing.T) {
	f := &fakeJoin{}
	release := make(chan struct{})
	var built atomic.Bool
	var joinedAfterBuild atomic.Bool
	j := startLaterJoin(f.laterJoin(
		func(context.Context) error { <-release; built.Store(true); return nil },
		func(context.Context) error { joinedAfterBuild.Store(built.Load()); return nil }))
	require.Eventually(t, func() bool { return len(f.got()) == 1 }, time.Minute, 10*time.Millisecond)
	require.Equal(t, []string{"build started"}, f.got(), "the node started before its build ended")

	close(release)
	select {
	case <-j.done:
	case <-time.After(time.Minute):
		t.Fatal("the join did not end within a minute of the build")
	}
	require.True(t, joinedAfterBuild.Load(), "the node started before its build ended")
	require.Equal(t, []string{"build started", "build returned <nil>", "join"}, f.got())
	require.Len(t, f.logs, 2)
	require.Contains(t, f.logs[0], "real node: built in ")
	require.Contains(t, f.logs[1], "real node: "+RealNodeName+" ready in ")
	require.False(t, j.stop(), "nothing left to stop after the join")
}

func TestLaterJoinGivesUpWithTheBuildsErrorAndNeverStartsTheNode(t *testing.T) {
	f := &fakeJoin{}
	j := startLaterJoin(f.laterJoin(
		func(context.Context) error {
			return errors.New("the build failed: exit status 1 (log: /state/logs/real-node-build.log)")
		},
		func(context.Context) error { return nil }))
	<-j.done
	require.Equal(t, []string{
		"build started",
		"build returned the build failed: exit status 1 (log: /state/logs/real-node-build.log)",
		"give up: the build failed: exit status 1 (log: /state/logs/real-node-build.log)",
	}, f.got())
}

func TestLaterJoinGivesUpWhenTheNodeDoesNotStart(t *testing.T) {
	f := &fakeJoin{}
	j := startLaterJoin(f.laterJoin(
		func(context.Context) error { return nil },
		func(context.Context) error { return errors.New("kubelet exited: exit status 1") }))
	<-j.done
	require.Equal(t, []string{"build started", "build returned <nil>", "join",
		"give up: it did not start: kubelet exited: exit status 1"}, f.got())
}

func TestLaterJoinStopCancelsTheBuildAndWaitsForIt(t *testing.T) {
	f := &fakeJoin{}
	j := startLaterJoin(f.laterJoin(
		func(ctx context.Context) error {
			<-ctx.Done()
			time.Sleep(100 * time.Millisecond) // a build that takes a moment to stop
			return ctx.Err()
		},
		func(context.Context) error { return nil }))
	require.Eventually(t, func() bool { return len(f.got()) == 1 }, 5*time.Second, 10*time.Millisecond)
	require.True(t, j.stop())
	// Neither the node's start nor a "no real node" verdict: the cluster is stopping.
	require.Equal(t, []string{"build started", "build returned context canceled"}, f.got())
}

func TestRunBuildLogsItsOutputAndReportsItsExit(t *testing.T) {
	dir := t.TempDir()
	err := runBuild(context.Background(), []string{"bash", "-c", "echo building kubelet; exit 3"}, dir)
	require.ErrorContains(t, err, "bash -c echo building kubelet; exit 3: exit status 3")
	log, err := os.ReadFile(filepath.Join(dir, "real-node-build.log"))
	require.NoError(t, err)
	require.Contains(t, string(log), "building kubelet\n")

	require.NoError(t, runBuild(context.Background(), []string{"true"}, dir))
}

// TestRunBuildStoppedLeavesNoProcessBehind stops a build whose script runs a child that
// ignores SIGTERM, as a compiler or debootstrap under a shell would be: once runBuild has
// returned, neither the script nor the child is left.
func TestRunBuildStoppedLeavesNoProcessBehind(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	script := fmt.Sprintf(`bash -c 'trap "" TERM; echo $$ > %s; exec sleep 300' & wait`, pidFile)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runBuild(ctx, []string{"bash", "-c", script}, dir) }()
	var child int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	require.True(t, alive(child))

	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(buildStopGrace + 10*time.Second):
		t.Fatal("runBuild did not return after its context ended")
	}
	require.Eventually(t, func() bool { return !alive(child) }, 5*time.Second, 20*time.Millisecond,
		"the build's child %d outlived it", child)
}

// alive reports whether pid runs (a zombie has exited).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

func TestRealNodeNotBuiltNamesWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	cfg := &RealNodeConfig{
		Kubelet: filepath.Join(dir, "kubelet"), KubeProxy: filepath.Join(dir, "kube-proxy"),
		CNIBinDir: filepath.Join(dir, "cni"), Crane: filepath.Join(dir, "crane"),
		CoreDNS: filepath.Join(dir, "coredns"), ImagesDir: filepath.Join(dir, "images"),
	}
	missing := realNodeNotBuilt(cfg)
	require.Equal(t, "kubelet, kube-proxy, the CNI plugins, crane, CoreDNS, the pause image, the postgres image, the postgres14 image and the mysql image",
		describeNotBuilt(missing))
	require.Contains(t, missing[0].why, "run hack/build-tools.sh")

	for _, bin := range []string{cfg.Kubelet, cfg.KubeProxy, cfg.Crane, cfg.CoreDNS} {
		require.NoError(t, os.WriteFile(bin, nil, 0o755))
	}
	require.NoError(t, os.MkdirAll(cfg.CNIBinDir, 0o755))
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		require.NoError(t, os.WriteFile(filepath.Join(cfg.CNIBinDir, p), nil, 0o755))
	}
	require.NoError(t, os.MkdirAll(cfg.ImagesDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cfg.ImagesDir, "pause.tags"), []byte("localcluster/pause:1\n"), 0o644))
	missing = realNodeNotBuilt(cfg)
	require.Equal(t, "the postgres image, the postgres14 image and the mysql image", describeNotBuilt(missing))
	require.Contains(t, missing[0].why, "run hack/build-node-images.sh")

	require.NoError(t, os.WriteFile(filepath.Join(cfg.ImagesDir, "postgres.tags"), []byte("library/postgres:15\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cfg.ImagesDir, "postgres14.tags"), []byte("library/postgres:14\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cfg.ImagesDir, "mysql.tags"), []byte("library/mysql:9.7\n"), 0o644))
	require.Empty(t, realNodeNotBuilt(cfg))
}

func TestBelongsOnRealNodeOnlyForItsImagesOffIt(t *testing.T) {
	images := []string{"postgres:15", "docker.io/library/postgres:15"}
	pod := func(image, node string, selector map[string]string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: node, NodeSelector: selector,
			Containers: []corev1.Container{{Name: "db", Image: image}}}}
	}
	require.True(t, belongsOnRealNode(pod("postgres:15", FakeNodeName, nil), images))
	require.True(t, belongsOnRealNode(pod("docker.io/library/postgres:15", "", nil), images), "pending, without the policy's selector")
	require.False(t, belongsOnRealNode(pod("postgres:16", FakeNodeName, nil), images), "an image the real node has not")
	require.False(t, belongsOnRealNode(pod("postgres:15", RealNodeName, nil), images), "already there")
	require.False(t, belongsOnRealNode(pod("postgres:15", "", map[string]string{RealNodeLabel: "true"}), images), "sent there by the policy")
	deleting := pod("postgres:15", FakeNodeName, nil)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	require.False(t, belongsOnRealNode(deleting, images), "already being deleted")
}
