//go:build tools

// Package tools records crane (go-containerregistry's registry client and a registry server),
// which serves the local cluster's images on loopback and builds the engine images from a root
// file system; `go mod tidy` keeps its dependencies. hack/build-tools.sh builds it with
// `go build`.
package tools

import _ "github.com/google/go-containerregistry/cmd/crane"
