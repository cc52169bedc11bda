package localcluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// The real node's cluster DNS: CoreDNS on the node's IP, answering the cluster.local zone
// from the API (Services, and the Pods of headless Services by hostname) for the real node's
// Pods, which the kubelet points at it. Names outside the cluster get no answer: Pods reach
// only each other and the host.
const (
	clusterDomain = "cluster.local"
	// dnsUser is CoreDNS's identity; the ClusterRole in realnode.yaml lets it read what the
	// kubernetes plugin serves.
	dnsUser = "system:coredns"
)

// corefile is CoreDNS's configuration: the kubernetes plugin for clusterDomain and the reverse
// zones, on realNodeIP:53, with its health and readiness endpoints on loopback.
func corefile(kubeconfig string, healthPort, readyPort int) string {
	return fmt.Sprintf(`.:53 {
    bind %s
    errors
    health %s
    ready %s
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
`, realNodeIP, hostPort(healthPort), hostPort(readyPort), clusterDomain, kubeconfig)
}

// DNSServer is the real node's cluster DNS ("<ip>:53"), which resolves the cluster's names
// from the host too; our server asks it for backup stores' names (--dns-server).
func (c *Cluster) DNSServer() string { return net.JoinHostPort(realNodeIP, "53") }

// startDNS runs CoreDNS and waits until its kubernetes plugin has synced (/ready).
func (c *Cluster) startDNS(ctx context.Context) error {
	n := c.node
	kp, err := c.pki.ClientCert("coredns", dnsUser)
	if err != nil {
		return err
	}
	kubeconfig, err := c.kubeconfigFor("coredns", kp)
	if err != nil {
		return err
	}
	healthPort, err := freePort()
	if err != nil {
		return err
	}
	readyPort, err := freePort()
	if err != nil {
		return err
	}
	path := filepath.Join(n.dir, "Corefile")
	if err := os.WriteFile(path, []byte(corefile(kubeconfig, healthPort, readyPort)), 0o600); err != nil {
		return err
	}
	p, err := c.start("coredns", n.cfg.CoreDNS, []string{"-conf", path})
	if err != nil {
		return err
	}
	n.dns = p
	client := &http.Client{Timeout: 5 * time.Second}
	return c.wait(ctx, p, client, "http://"+hostPort(readyPort)+"/ready")
}
