package localcluster

import (
	"context"
	"fmt"
	"slices"
	"syscall"
)

// ControllerName is database-controller's child name: its log is <LogDir>/database-controller.log.
const ControllerName = "database-controller"

// StartController starts database-controller (Config.ControllerBinary) and waits until its
// /readyz answers (its informer caches synced). It authenticates as ControllerUser and keeps
// the health port of its first start, so ControllerURL stays valid across a Kill and a new
// StartController. It fails if the controller is already running.
func (c *Cluster) StartController(ctx context.Context) error {
	if c.cfg.ControllerBinary == "" {
		return fmt.Errorf("localcluster: no ControllerBinary configured")
	}
	if c.running(ControllerName) != nil {
		return fmt.Errorf("localcluster: %s is already running", ControllerName)
	}
	if c.ControllerURL == "" {
		port, err := freePort()
		if err != nil {
			return err
		}
		c.ControllerURL = "http://" + hostPort(port)
	}
	kubeconfig, err := c.kubeconfigFor(ControllerName, c.pki.ControllerAuthn)
	if err != nil {
		return err
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--health-probe-bind-address=" + c.ControllerURL[len("http://"):],
	}, c.cfg.ControllerArgs...)
	p, err := c.start(ControllerName, c.cfg.ControllerBinary, args)
	if err != nil {
		return err
	}
	probe, err := httpClient(nil, nil)
	if err != nil {
		return err
	}
	return c.wait(ctx, p, probe, c.ControllerURL+"/readyz")
}

// Kill sends SIGKILL to the child called name (e.g. ControllerName) and its process group,
// as a crash would, and waits until it is gone. It is not reported on Failed, and Stop skips
// it. Killing a child that does not run is an error.
func (c *Cluster) Kill(name string) error {
	c.mu.Lock()
	p := c.runningLocked(name)
	if p != nil {
		c.procs = slices.DeleteFunc(c.procs, func(q *process) bool { return q == p })
	}
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("localcluster: %s is not running", name)
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	c.cfg.Logf("%-28s killed", name)
	return nil
}

// running returns the live child called name, or nil.
func (c *Cluster) running(name string) *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runningLocked(name)
}

func (c *Cluster) runningLocked(name string) *process {
	for _, p := range c.procs {
		if p.name == name {
			if done, _ := p.exited(); !done {
				return p
			}
		}
	}
	return nil
}
