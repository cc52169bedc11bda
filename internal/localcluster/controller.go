package localcluster

import (
	"context"
	"fmt"
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
	c.mu.Lock()
	again := c.componentLocked(ControllerName) != nil
	c.mu.Unlock()
	if again {
		return c.StartComponent(ctx, ControllerName)
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
