//go:build tools

// Package tools records CoreDNS, the local cluster's cluster DNS on its real node (Services'
// and headless Pods' names inside Pods), so `go mod tidy` keeps its dependencies.
// hack/build-tools.sh builds it with `go build`.
package tools

import _ "github.com/coredns/coredns"
