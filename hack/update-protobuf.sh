#!/usr/bin/env bash
# Generates the protobuf form of example.com/v1 (Database, DatabaseList and
# the structs they hold) with k8s.io/code-generator's go-to-protobuf, at the
# version go.mod pins. It writes, in pkg/apis/example/v1:
#   generated.proto   the IDL (no gogo extensions)
#   generated.pb.go   Marshal/Unmarshal/Size/String (standard library and
#                     apimachinery only, no gogo runtime)
# and adds the `protobuf:"..."` struct tags to types.go. Called by
# update-codegen.sh; safe to run on its own.
#
# Needs protoc (Debian's protobuf-compiler: installed here when missing if we
# are root and apt-get exists), and builds go-to-protobuf, protoc-gen-gogo and
# goimports into bin/codegen. Nothing is ever written into the module cache:
# the apimachinery packages are given to go-to-protobuf with a leading "-" (read,
# not generated), and protoc reads copies of their .proto files from a
# GOPATH-like temporary root.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
# shellcheck source=hack/lib.sh
source "${ROOT}/hack/lib.sh"
MODULE="$(go list -m)"
CODEGEN_PKG="$(module_dir k8s.io/code-generator)"
APIMACHINERY_PKG="$(module_dir k8s.io/apimachinery)"
BOILERPLATE="${ROOT}/hack/boilerplate.go.txt"

# The packages to generate, and the Go packages their types refer to. Every
# entry of APIMACHINERY_PACKAGES starts with "-": without it go-to-protobuf
# regenerates that package too, in place, i.e. inside the read-only module
# cache (go mod verify in verify-codegen.sh would catch it).
PACKAGES=(
    "${MODULE}/pkg/apis/example/v1"
)
APIMACHINERY_PACKAGES=(
    -k8s.io/apimachinery/pkg/util/intstr
    -k8s.io/apimachinery/pkg/api/resource
    -k8s.io/apimachinery/pkg/runtime/schema
    -k8s.io/apimachinery/pkg/runtime
    -k8s.io/apimachinery/pkg/apis/meta/v1
)

export GOBIN="${ROOT}/bin/codegen"
mkdir -p "${GOBIN}"
export PATH="${GOBIN}:${PATH}"

# protoc: Debian's protobuf-compiler. Installed when missing if we can (root
# and apt-get, as on CI and the dev machines); otherwise say what is needed.
ensure_protoc() {
    if command -v protoc >/dev/null 2>&1; then
        return 0
    fi
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "protoc not found: installing Debian's protobuf-compiler with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq protobuf-compiler >&2
    fi
    if ! command -v protoc >/dev/null 2>&1; then
        cat >&2 <<'EOF'
error: protoc (the Protocol Buffers compiler, version 3 or later) is not on PATH.
  It generates pkg/apis/example/v1/generated.pb.go. Install it, e.g.
    Debian/Ubuntu:  sudo apt-get install protobuf-compiler
    Fedora:         sudo dnf install protobuf-compiler
    macOS:          brew install protobuf
  then run hack/update-codegen.sh (make generate) again.
EOF
        exit 1
    fi
}
ensure_protoc

# go-to-protobuf and protoc-gen-gogo from code-generator's own module (as
# kube_codegen.sh builds the other generators), so their dependencies (gogo
# v1.3.2 among them) are code-generator's, not ours.
(
    cd "${CODEGEN_PKG}"
    GO111MODULE=on go install \
        k8s.io/code-generator/cmd/go-to-protobuf \
        k8s.io/code-generator/cmd/go-to-protobuf/protoc-gen-gogo
)
GOGO_PKG="$(cd "${CODEGEN_PKG}" && module_dir github.com/gogo/protobuf)"

# goimports, which go-to-protobuf runs on generated.pb.go: golang.org/x/tools
# at the version our go.mod has, built with its own go.mod (ours lacks the
# go.sum lines of its dependencies, and does not need them).
X_TOOLS_VERSION="$(go list -m -f '{{.Version}}' golang.org/x/tools)"
: "${X_TOOLS_VERSION:?golang.org/x/tools is not in go.mod: pick a goimports version here}"
if [[ ! -x "${GOBIN}/goimports" ]] || [[ "$(cat "${GOBIN}/.goimports-version" 2>/dev/null)" != "${X_TOOLS_VERSION}" ]]; then
    GO111MODULE=on go install "golang.org/x/tools/cmd/goimports@${X_TOOLS_VERSION}"
    echo "${X_TOOLS_VERSION}" >"${GOBIN}/.goimports-version"
fi

# A GOPATH-like root: go-to-protobuf finds the .proto files and writes
# generated.pb.go at <root>/<import path>, so our module is a symlink there,
# and the .proto files we import are copies (protoc only reads them).
GOPATH_ROOT="$(mktemp -d)"
trap 'rm -rf "${GOPATH_ROOT}"' EXIT
SRC="${GOPATH_ROOT}/src"
mkdir -p "${SRC}/$(dirname "${MODULE}")"
ln -s "${ROOT}" "${SRC}/${MODULE}"
(
    cd "${APIMACHINERY_PKG}"
    find . -name '*.proto' -print0 | while IFS= read -r -d '' f; do
        mkdir -p "${SRC}/k8s.io/apimachinery/$(dirname "${f}")"
        cp "${f}" "${SRC}/k8s.io/apimachinery/${f}"
    done
)
mkdir -p "${SRC}/github.com/gogo/protobuf/gogoproto"
cp "${GOGO_PKG}/gogoproto/gogo.proto" "${SRC}/github.com/gogo/protobuf/gogoproto/gogo.proto"
# gogo.proto imports google/protobuf/descriptor.proto: take gogo's own copy so
# the result does not depend on whether libprotobuf-dev is installed.
mkdir -p "${SRC}/google/protobuf"
cp "${GOGO_PKG}/protobuf/google/protobuf/descriptor.proto" "${SRC}/google/protobuf/descriptor.proto"
chmod -R u+w "${SRC}"

join() { local IFS=,; echo "$*"; }

go-to-protobuf \
    --go-header-file "${BOILERPLATE}" \
    --output-dir "${SRC}" \
    --proto-import "${SRC}" \
    --apimachinery-packages "$(join "${APIMACHINERY_PACKAGES[@]}")" \
    --packages "$(join "${PACKAGES[@]}")"
