package localcluster

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"time"

	"k8s.io/client-go/util/flowcontrol"
)

// Restart backoff of a child that exits while the cluster runs, kubelet's CrashLoopBackOff
// in shorter steps: the first restart after restartBackoffInitial, each next one after twice
// the last, at most restartBackoffMax; a child that ran for twice restartBackoffMax since its
// last restart starts again from restartBackoffInitial.
const (
	restartBackoffInitial = time.Second
	restartBackoffMax     = 30 * time.Second
)

// component is a supervised child: its command line, its current run, and the readiness probe
// its start waited for. It is started again after the restart backoff whenever it exits while
// the cluster runs, unless it was stopped on purpose (Kill, StopComponent).
type component struct {
	name, binary string
	args         []string
	proc         *process // the current (or last) run
	held         bool     // stopped on purpose: not restarted until StartComponent
	restarts     int
	// supervised is closed when the supervisor of the current run has returned: it restarts
	// nothing after that, until StartComponent starts the child and a supervisor again.
	supervised chan struct{}
	// probe is the URL that answers 200 once the child is ready, and the client to ask it.
	probeURL    string
	probeClient *http.Client
}

// start runs a child and supervises it: an exit before Stop (and not by Kill or
// StopComponent) is logged and followed by a restart with the same command line after the
// restart backoff. The returned process is the first run.
func (c *Cluster) start(name, binary string, args []string) (*process, error) {
	p, err := startProcess(name, binary, args, c.LogDir())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	comp := &component{name: name, binary: binary, args: args, proc: p, supervised: make(chan struct{})}
	c.components = append(c.components, comp)
	c.mu.Unlock()
	go c.supervise(comp, p, comp.supervised)
	return p, nil
}

// supervise waits for p, the current run of comp, to exit, then starts comp again after the
// restart backoff, for as long as the cluster runs and nobody stopped comp on purpose. It
// closes done when it returns.
func (c *Cluster) supervise(comp *component, p *process, done chan struct{}) {
	defer close(done)
	for {
		<-p.done
		c.mu.Lock()
		if c.stopping || comp.held || comp.proc != p {
			c.mu.Unlock()
			return
		}
		c.backoff.Next(comp.name, time.Now())
		delay := c.backoff.Get(comp.name)
		restart := comp.restarts + 1
		c.mu.Unlock()
		c.cfg.Logf("%-28s %s after %v; restarting in %v (restart %d, log %s)", comp.name, p.status(),
			p.ran().Round(100*time.Millisecond), delay, restart, p.logPath)

		select {
		case <-c.stopped:
			return
		case <-time.After(delay):
		}
		c.mu.Lock()
		if c.stopping || comp.held || comp.proc != p {
			c.mu.Unlock()
			return
		}
		next, err := startProcess(comp.name, comp.binary, comp.args, c.LogDir())
		if err != nil {
			// Counted as a run that exited at once: the next attempt backs off further.
			next = failedProcess(comp.name, p.logPath, err)
		}
		comp.proc = next
		comp.restarts++
		c.mu.Unlock()
		p = next
	}
}

// Kill sends SIGKILL to the child called name (e.g. ControllerName) and its process group,
// as a crash would, and waits until it is gone. It is not restarted until StartComponent (or
// StartController) and Stop skips it. Killing a child that does not run is an error.
func (c *Cluster) Kill(name string) error {
	p, err := c.hold(name)
	if err != nil {
		return err
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	c.cfg.Logf("%-28s killed", name)
	return nil
}

// StopComponent stops the child called name (e.g. "kube-apiserver") as Stop does: SIGTERM to
// its process group, SIGKILL after 15s. It is not restarted until StartComponent.
func (c *Cluster) StopComponent(name string) error {
	p, err := c.hold(name)
	if err != nil {
		return err
	}
	t := time.Now()
	p.stop(15 * time.Second)
	c.cfg.Logf("%-28s stopped in %v", name, time.Since(t).Round(100*time.Millisecond))
	return nil
}

// hold marks the running child called name as stopped on purpose and returns its process.
func (c *Cluster) hold(name string) (*process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	comp := c.componentLocked(name)
	if comp == nil || comp.held || comp.proc.hasExited() {
		return nil, fmt.Errorf("localcluster: %s is not running", name)
	}
	comp.held = true
	return comp.proc, nil
}

// StartComponent starts again a child stopped by Kill or StopComponent, with the command line
// of its first start, and waits until it is ready as its first start did (e.g.
// kube-apiserver's /readyz). It fails if the child was never started or still runs.
func (c *Cluster) StartComponent(ctx context.Context, name string) error {
	c.mu.Lock()
	comp := c.componentLocked(name)
	switch {
	case c.stopping:
		c.mu.Unlock()
		return fmt.Errorf("localcluster: the cluster is stopped")
	case comp == nil:
		c.mu.Unlock()
		return fmt.Errorf("localcluster: %s was never started", name)
	case !comp.held || !comp.proc.hasExited():
		c.mu.Unlock()
		return fmt.Errorf("localcluster: %s is already running", name)
	}
	p, err := startProcess(comp.name, comp.binary, comp.args, c.LogDir())
	if err != nil {
		c.mu.Unlock()
		return err
	}
	comp.proc, comp.held, comp.supervised = p, false, make(chan struct{})
	c.backoff.Reset(comp.name)
	url, client := comp.probeURL, comp.probeClient
	c.mu.Unlock()
	go c.supervise(comp, p, comp.supervised)
	if url == "" {
		return nil
	}
	return c.wait(ctx, p, client, url)
}

// Signal sends sig to the process group of the child called name, as an outside `kill`
// would. If the child exits, it is restarted as after any exit.
func (c *Cluster) Signal(name string, sig syscall.Signal) error {
	p := c.running(name)
	if p == nil {
		return fmt.Errorf("localcluster: %s is not running", name)
	}
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Restarts is how many times the child called name was started again after it exited by
// itself (not counting StartComponent after Kill or StopComponent).
func (c *Cluster) Restarts(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if comp := c.componentLocked(name); comp != nil {
		return comp.restarts
	}
	return 0
}

// running returns the live run of the child called name, or nil.
func (c *Cluster) running(name string) *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	if comp := c.componentLocked(name); comp != nil && !comp.proc.hasExited() {
		return comp.proc
	}
	return nil
}

func (c *Cluster) componentLocked(name string) *component {
	for _, comp := range c.components {
		if comp.name == name {
			return comp
		}
	}
	return nil
}

// setProbe records the readiness probe of the child p is a run of, for StartComponent.
func (c *Cluster) setProbe(p *process, client *http.Client, url string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if comp := c.componentLocked(p.name); comp != nil {
		comp.probeURL, comp.probeClient = url, client
	}
}

func newRestartBackoff() *flowcontrol.Backoff {
	return flowcontrol.NewBackOff(restartBackoffInitial, restartBackoffMax)
}
