// Command coredns is CoreDNS with only the plugins the local cluster's Corefile names
// (internal/localcluster/dns.go): bind, ready, health, errors, cache and kubernetes. CoreDNS
// builds a server from the plugins its main package imports, and runs its directives in the
// order of dnsserver.Directives; an upstream build imports every plugin (core/plugin), with
// the clients of three clouds and etcd, most of a cold build's time. This is CoreDNS's
// documented way to build with a subset of its plugins, from a module of our own.
// hack/build-tools.sh builds it.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives are the plugins above, in the relative order upstream's plugin.cfg gives them
// (core/dnsserver/zdirectives.go): a plugin sees only the requests those before it pass on.
var directives = []string{"bind", "ready", "health", "errors", "cache", "kubernetes"}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
