package localcluster

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// ControllerName is database-controller's child name: its log is <LogDir>/database-controller.log.
const ControllerName = "database-controller"

// StartController starts database-controller (Config.ControllerBinary) and waits until its
// /readyz answers (its informer caches synced) to an anonymous request over HTTPS, with the
// real node's IP as its --superuser-sources and CoreDNS's domain as its --cluster-domain. It
// authenticates as ControllerUser and keeps the secure port of its first start, so
// ControllerURL stays valid across a Kill and a new StartController. It fails if the
// controller is already running.
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
		c.ControllerURL = "https://" + hostPort(port)
	}
	port := c.ControllerURL[strings.LastIndex(c.ControllerURL, ":")+1:]
	kubeconfig, err := c.kubeconfigFor(ControllerName, c.pki.ControllerAuthn)
	if err != nil {
		return err
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + port,
		"--tls-cert-file=" + c.pki.Controller.CertFile,
		"--tls-private-key-file=" + c.pki.Controller.KeyFile,
		// The controller runs on the host and reaches the real node's Pods through the
		// node's bridge, whose address (the node's IP) its connections come from: the
		// database superusers log in from there only.
		"--superuser-sources=" + realNodeIP,
		"--cluster-domain=" + clusterDomain,
	}, c.cfg.ControllerArgs...)
	p, err := c.start(ControllerName, c.cfg.ControllerBinary, args)
	if err != nil {
		return err
	}
	probe, err := httpClient(c.pki.ServingCA.CertPEM(), nil)
	if err != nil {
		return err
	}
	return c.wait(ctx, p, probe, c.ControllerURL+"/readyz")
}

// ControllerClient returns an HTTPS client for ControllerURL that trusts its serving
// certificate and presents a client certificate of the cluster's client CA for user in
// groups (issued once and kept with the PKI: a later call for user reuses it, groups and
// all), or none when user is empty (an anonymous
// request). The controller authenticates the certificate against the client CA it reads
// from kube-apiserver and asks kube-apiserver whether user may get the path.
func (c *Cluster) ControllerClient(user string, groups ...string) (*http.Client, error) {
	var kp *keyPair
	if user != "" {
		var err error
		if kp, err = c.pki.ClientCert(user, user, groups...); err != nil {
			return nil, err
		}
	}
	return httpClient(c.pki.ServingCA.CertPEM(), kp)
}
