package localcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// process is one run of a child of the local cluster: a binary in its own process group, with
// its output appended to <state>/logs/<name>.log.
type process struct {
	name    string
	cmd     *exec.Cmd // nil for a run that could not start
	logPath string
	started time.Time
	done    chan struct{} // closed when the process has exited
	err     error         // exit status, set before done is closed
	ended   time.Time     // set before done is closed
}

// startProcess runs binary with args in a new process group. The kernel kills it if this
// process dies first (Pdeathsig), so even a crashed test run leaves no orphan behind.
func startProcess(name, binary string, args []string, logDir string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "\n=== %s %s %s\n", time.Now().Format(time.RFC3339), binary, strings.Join(args, " "))
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, started: time.Now(), done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		p.ended = time.Now()
		fmt.Fprintf(logFile, "=== %s %s\n", p.ended.Format(time.RFC3339), p.status())
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// failedProcess is a run that could not start: it has exited with err.
func failedProcess(name, logPath string, err error) *process {
	now := time.Now()
	p := &process{name: name, logPath: logPath, started: now, ended: now, err: err, done: make(chan struct{})}
	close(p.done)
	return p
}

// status says how the process ended: "exited", "exited: signal: killed", ...
func (p *process) status() string {
	if p.err == nil {
		return "exited"
	}
	return "exited: " + p.err.Error()
}

// hasExited reports whether the process has exited.
func (p *process) hasExited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ran is how long the process ran until it exited (or until now).
func (p *process) ran() time.Duration {
	if p.hasExited() {
		return p.ended.Sub(p.started)
	}
	return time.Since(p.started)
}

// exited reports the exit error if the process has already exited.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		if p.err == nil {
			return true, fmt.Errorf("%s exited", p.name)
		}
		return true, fmt.Errorf("%s exited: %w", p.name, p.err)
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	if p.cmd == nil {
		return
	}
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
	}
	// Anything the child left in its group goes too.
	_ = syscall.Kill(pgid, syscall.SIGKILL)
}

// tail returns the last n lines of the process's log.
func (p *process) tail(n int) string {
	return tailFile(p.logPath, n)
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago. The kernel hands out
// ephemeral ports round-robin, so two runs picking at once rarely collide.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitHealthy polls url until it answers 200 OK, the process exits, or ctx ends. The error
// carries the last response or connection error.
func waitHealthy(ctx context.Context, p *process, client *http.Client, url string) error {
	var last error
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if p != nil {
			if ok, err := p.exited(); ok {
				return err
			}
		}
		resp, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", url, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// httpClient returns a client trusting ca (nil: no verification, used only for loopback
// health probes of components with self-signed serving certs) and presenting cert if set.
func httpClient(ca []byte, cert *keyPair) (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca == nil {
		tlsConfig.InsecureSkipVerify = true
	} else {
		pool, err := certutil.NewPoolFromBytes(ca)
		if err != nil {
			return nil, err
		}
		tlsConfig.RootCAs = pool
	}
	if cert != nil {
		tlsConfig.Certificates = []tls.Certificate{{Certificate: [][]byte{cert.Cert.Raw}, PrivateKey: cert.Key}}
	}
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true},
	}, nil
}

var errNotBuilt = errors.New("not built")

// requireFile checks that an executable exists before we try to run it.
func requireFile(path, hint string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w (%s)", path, errNotBuilt, hint)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s: not an executable file", path)
	}
	return nil
}

func hostPort(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
