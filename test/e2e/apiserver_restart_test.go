//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
)

// apiServerName is our server's child name in the local cluster.
const apiServerName = "database-apiserver"

// apiServerProcess is database-apiserver run by the test itself, with the command line the
// local cluster ran it with (same port, certificates, etcd and kubeconfigs), so that
// kube-apiserver's APIService keeps pointing at it.
type apiServerProcess struct {
	cmd  *exec.Cmd
	done chan error
}

// startAPIServer runs argv with its output appended to log, in its own process group, killed
// by the kernel if the test dies first.
func startAPIServer(t *testing.T, argv []string, log io.Writer) *apiServerProcess {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	p := &apiServerProcess{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	return p
}

// terminate sends SIGTERM, as the kubelet does, and returns how long the server took to exit
// and whether it exited by itself: it kills the server after limit.
func (p *apiServerProcess) terminate(t *testing.T, limit time.Duration) (time.Duration, bool) {
	t.Helper()
	started := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		require.NoError(t, err, "exit status after SIGTERM")
		return time.Since(started), true
	case <-time.After(limit):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return time.Since(started), false
	}
}

// commandLine is the argv of the running process pid.
func commandLine(t *testing.T, pid int) []string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	require.NoError(t, err)
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
}

// statusCounts counts the answers of the requests a load sends, by HTTP status; code 0 is a
// request that got no answer.
type statusCounts struct {
	mu       sync.Mutex
	counts   map[int]int
	examples map[int]string
	// authnNotReady counts our server's 503s before the front-proxy CA was loaded.
	authnNotReady int
}

func (s *statusCounts) add(code int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[code]++
	if code == http.StatusServiceUnavailable && strings.Contains(body, "cannot authenticate requests yet") {
		s.authnNotReady++
	}
	if _, ok := s.examples[code]; !ok {
		s.examples[code] = body
	}
}

// ok returns how many requests were answered 200.
func (s *statusCounts) ok() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[http.StatusOK]
}

func (s *statusCounts) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var codes []int
	for c := range s.counts {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var b strings.Builder
	for _, c := range codes {
		fmt.Fprintf(&b, "%d: %d (e.g. %.200q)\n", c, s.counts[c], s.examples[c])
	}
	fmt.Fprintf(&b, "of which 503s before the front-proxy CA was loaded: %d\n", s.authnNotReady)
	return b.String()
}

// TestAPIServerRestartsThroughKubeAPIServer restarts our server five times while clients read
// a Database through kube-apiserver without retrying, and stops each instance with SIGTERM
// while a watch through kube-apiserver is open:
//   - no request is refused with a 401 or 403: until the front-proxy CA is loaded, the server
//     answers 503 with Retry-After (and kube-apiserver answers 503 while it is down), so every
//     answer is a 200 or a retryable 503 or 429;
//   - /readyz is false until then, and then true;
//   - each instance exits by itself after SIGTERM while the watch is open: it ends the watch
//     (--shutdown-watch-termination-grace-period, 2s) instead of waiting --request-timeout
//     (60s) for it. The test gives up after 45s and logs each exit's time.
//
// At the end the local cluster is started again, so that later tests find the API server it
// supervises.
func TestAPIServerRestartsThroughKubeAPIServer(t *testing.T) {
	applyExamples(t)
	pid := cluster.PID(apiServerName)
	require.NotZero(t, pid, "%s runs", apiServerName)
	argv := commandLine(t, pid)
	require.NoError(t, cluster.Kill(apiServerName))

	logFile, err := os.OpenFile(filepath.Join(cluster.LogDir(), apiServerName+"-restarts.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	defer logFile.Close()
	var current *apiServerProcess
	t.Cleanup(func() {
		if current != nil {
			current.terminate(t, 30*time.Second)
		}
		// Back to a cluster that supervises its own database-apiserver.
		cluster.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var err error
		cluster, err = startCluster(ctx)
		require.NoError(t, err)
	})

	// Clients without retries, through kube-apiserver.
	through, err := rest.HTTPClientFor(cluster.AdminConfig)
	require.NoError(t, err)
	url := cluster.AdminConfig.Host + "/apis/example.com/v1/namespaces/production/databases/my-database"
	counts := &statusCounts{counts: map[int]int{}, examples: map[int]string{}}
	ctx, stopLoad := context.WithCancel(context.Background())
	var load sync.WaitGroup
	for range 4 {
		load.Add(1)
		go func() {
			defer load.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				resp, err := through.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						counts.add(0, err.Error())
					}
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				counts.add(resp.StatusCode, string(body))
				if resp.StatusCode != http.StatusOK {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	defer func() {
		stopLoad()
		load.Wait()
	}()

	// Our server's own /readyz, as a kubelet probes it (no credentials).
	ca, err := certutil.NewPoolFromBytes(cluster.ServingCAPEM())
	require.NoError(t, err)
	direct := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca}}}
	readyz := func() (int, string) {
		resp, err := direct.Get(cluster.APIServerURL + "/readyz?verbose")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	cs := clientset(t)
	for i := range 5 {
		current = startAPIServer(t, argv, logFile)
		// Ready within a minute; while not, the front-proxy CA check is what fails.
		var code int
		var body string
		eventually(t, time.Minute, func() error {
			if code, body = readyz(); code != http.StatusOK {
				return fmt.Errorf("restart %d: /readyz %d: %s", i, code, body)
			}
			return nil
		})
		require.Contains(t, body, "[+]requestheader-client-ca ok")
		// The load reaches the new instance: it answers the load's requests.
		eventually(t, time.Minute, func() error {
			_, err := cs.ExampleV1().Databases("production").Get(context.Background(), "my-database", metav1.GetOptions{})
			return err
		})
		answered := counts.ok()
		eventually(t, time.Minute, func() error {
			if n := counts.ok() - answered; n < 20 {
				return fmt.Errorf("restart %d: %d requests of the load answered 200 since the instance is ready", i, n)
			}
			return nil
		})
		// Then a watch through kube-apiserver, open for longer than the server may take to
		// exit: only the server can end it.
		watchCtx, cancelWatch := context.WithTimeout(context.Background(), 5*time.Minute)
		w, err := cs.ExampleV1().Databases("production").Watch(watchCtx, metav1.ListOptions{})
		require.NoError(t, err)
		select {
		case _, ok := <-w.ResultChan():
			require.True(t, ok, "the watch delivers the existing Databases first")
		case <-time.After(time.Minute):
			require.FailNow(t, "no event on the watch")
		}

		took, exited := current.terminate(t, 45*time.Second)
		current = nil
		w.Stop()
		cancelWatch()
		t.Logf("measured: restart %d: exited %v after SIGTERM with a watch open", i, took.Round(10*time.Millisecond))
		require.True(t, exited, "restart %d: still running %v after SIGTERM, with a watch open", i, took.Round(time.Second))
	}
	current = startAPIServer(t, argv, logFile)
	eventually(t, time.Minute, func() error {
		if code, body := readyz(); code != http.StatusOK {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	eventually(t, time.Minute, func() error {
		_, err := cs.ExampleV1().Databases("production").Get(context.Background(), "my-database", metav1.GetOptions{})
		return err
	})
	stopLoad()
	load.Wait()

	t.Logf("measured: answers through kube-apiserver across 5 restarts of our API server:\n%s", counts)
	counts.mu.Lock()
	defer counts.mu.Unlock()
	require.Positive(t, counts.counts[http.StatusOK])
	for code, n := range counts.counts {
		// 429 with Retry-After is k8s.io/apiserver's answer to a request that reaches a server
		// already draining on a kept-alive connection.
		require.Contains(t, []int{http.StatusOK, http.StatusTooManyRequests, http.StatusServiceUnavailable}, code,
			"%d answers %d, e.g. %s", n, code, counts.examples[code])
	}
	log, err := os.ReadFile(logFile.Name())
	require.NoError(t, err)
	require.NotContains(t, string(log), "Failed to shutdown server")
}
