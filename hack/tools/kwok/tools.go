//go:build tools

// Package tools records the kwok command (simulated nodes, pods and volumes), so `go mod tidy`
// keeps its dependencies. hack/build-tools.sh builds it with `go build`.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
