//go:build tools

// Package tools records SeaweedFS's weed, the S3-compatible object store the local cluster's
// backup tests store backups in (`weed mini`: a master, a volume server, a filer and the S3
// gateway in one process); `go mod tidy` keeps its dependencies. hack/build-node-images.sh
// builds it with `go build` into the seaweedfs image. It cannot be built with `go install
// module@version`, which refuses a module whose go.mod has replace directives: this module
// repeats the one replace SeaweedFS's go.mod makes.
package tools

import _ "github.com/seaweedfs/seaweedfs/weed"
