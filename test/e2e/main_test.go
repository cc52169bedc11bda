//go:build e2e

// Package e2e drives the whole local control plane (internal/localcluster) the way a user
// does: kubectl through kube-apiserver, which proxies example.com to our aggregated server.
// Run with `make test-e2e` (it builds the pinned tools and bin/database-apiserver first).
//
// The tests share one cluster, started once by TestMain on a temporary state directory with
// free ports, and run one after another: some of them restart it.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"example.com/database-apiserver/internal/localcluster"
	"example.com/database-apiserver/pkg/generated/clientset/versioned"
)

var (
	// cluster is the running control plane; TestRestart* replaces it.
	cluster *localcluster.Cluster
	// clusterConfig starts it again on the same state.
	clusterConfig localcluster.Config
	// root is the repository root (artifacts/ lives there).
	root string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	root = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))

	dir, err := os.MkdirTemp("", "database-apiserver-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	clusterConfig, err = localcluster.DefaultConfig(root, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Short leases, so a killed controller's successor leads within seconds; frequent
	// resyncs, so a Database left alone is still reconciled (and must not be written); and
	// each reconcile logged with its Database (verbosity 4 in the controller's workqueue loop,
	// pkg/controller/database/controller.go), so a test can tell that one has run.
	clusterConfig.ControllerArgs = []string{
		"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=5s",
		"--leader-elect-retry-period=1s", "--resync-period=5s", "--vmodule=controller=4",
	}
	clusterConfig.Logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "localcluster: "+format+"\n", args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	started := time.Now()
	cluster, err = startCluster(ctx)
	fmt.Fprintf(os.Stderr, "e2e: local control plane started in %v\n", time.Since(started).Round(100*time.Millisecond))
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the local control plane: %v\n(state kept in %s)\n", err, dir)
		return 1
	}
	code := m.Run()
	cluster.Stop()
	if code != 0 || os.Getenv("E2E_KEEP_STATE") != "" {
		fmt.Fprintf(os.Stderr, "e2e: state and logs kept in %s\n", dir)
	} else {
		os.RemoveAll(dir)
	}
	return code
}

// startCluster starts the control plane on clusterConfig's state. Its AdminConfig, which
// every client of the tests is built from (copied, for an impersonating one), has no
// client-side rate limit.
func startCluster(ctx context.Context) (*localcluster.Cluster, error) {
	c, err := localcluster.Start(ctx, clusterConfig)
	if c != nil && c.AdminConfig != nil {
		unlimited(c.AdminConfig)
	}
	return c, err
}

// unlimited lifts client-go's default client-side rate limit (5 requests a second, bursts of
// 10) from cfg: a test that sends a few hundred requests through one client (an access
// matrix, one admission case after the other) would wait for it, not for the servers.
func unlimited(cfg *rest.Config) {
	cfg.QPS, cfg.Burst = -1, -1
}

// restConfig loads a kubeconfig written by the cluster, without a client-side rate limit.
func restConfig(t *testing.T, kubeconfig string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	unlimited(cfg)
	return cfg
}

// kubectl runs kubectl as admin and returns its stdout; it fails the test on error.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := kubectlAs(cluster.KubeconfigPath, "", args...)
	require.NoError(t, err, "kubectl %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), out, errOut)
	return out
}

// kubectlFails runs kubectl as the user of kubeconfig, requires it to fail, and returns
// stderr.
func kubectlFails(t *testing.T, kubeconfig, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := kubectlAs(kubeconfig, stdin, args...)
	require.Error(t, err, "kubectl %s succeeded unexpectedly: %s", strings.Join(args, " "), out)
	return errOut
}

// kubectlIn runs kubectl as admin with stdin.
func kubectlIn(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := kubectlAs(cluster.KubeconfigPath, stdin, args...)
	require.NoError(t, err, "kubectl %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), out, errOut)
	return out
}

func kubectlAs(kubeconfig, stdin string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := kubectlCmd(ctx, kubeconfig, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func kubectlCmd(ctx context.Context, kubeconfig string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	return cmd
}

// clientset is the generated clientset as admin.
func clientset(t *testing.T) versioned.Interface {
	t.Helper()
	return clientsetFor(t, cluster.AdminConfig)
}

func clientsetFor(t *testing.T, cfg *rest.Config) versioned.Interface {
	t.Helper()
	cs, err := versioned.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

// applyExamples applies artifacts/examples/ (my-database in production, 3 replicas), as the
// docs/install.md tells users to.
func applyExamples(t *testing.T) {
	t.Helper()
	kubectl(t, "apply", "-f", "artifacts/examples/")
}

// eventually polls cond every 250ms until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			require.NoError(t, err, "still failing after %v", timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
