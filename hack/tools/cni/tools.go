//go:build tools

// Package tools records the CNI plugins the local cluster's real node uses (a bridge with
// host-local addresses, the loopback interface, and hostPort mappings), so `go mod tidy` keeps
// their dependencies. hack/build-tools.sh builds them with `go build`.
package tools

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
)
