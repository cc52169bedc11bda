#!/usr/bin/env bash
# Regenerates everything under pkg/generated, every zz_generated.*.go file
# (k8s.io/code-generator's kube_codegen.sh, at the version go.mod pins) and the
# protobuf form of example.com/v1 (generated.proto, generated.pb.go and the
# protobuf struct tags in types.go; see hack/update-protobuf.sh, which installs
# protoc when it is missing and it can).
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"
# shellcheck source=hack/lib.sh
source "${ROOT}/hack/lib.sh"
MODULE="$(go list -m)"
CODEGEN_PKG="$(module_dir k8s.io/code-generator)"
BOILERPLATE="${ROOT}/hack/boilerplate.go.txt"

# The generators are installed into bin/codegen, never into the user's GOPATH/bin.
export GOBIN="${ROOT}/bin/codegen"
mkdir -p "${GOBIN}"

# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"
# The Scale of databases/scale comes from k8s.io/api. It lives in the
# read-only module cache: openapi-gen must read it, never write model names
# into it (go mod verify in verify-codegen.sh catches that).
KUBE_CODEGEN_READONLY_PKGS+=(k8s.io/api/autoscaling/v1)

kube::codegen::gen_helpers \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/pkg/apis"

# kube_codegen.sh has no protobuf step: go-to-protobuf runs here.
"${ROOT}/hack/update-protobuf.sh"

kube::codegen::gen_openapi \
    --output-dir "${ROOT}/pkg/generated/openapi" \
    --output-pkg "${MODULE}/pkg/generated/openapi" \
    --output-model-name-file zz_generated.model_name.go \
    --extra-pkgs k8s.io/api/autoscaling/v1 \
    --report-filename "${ROOT}/hack/api-violations.list" \
    --update-report \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/pkg/apis"

# --prefers-protobuf: the clientset asks for and sends protobuf by default
# (Accept: protobuf, then JSON), as client-go's own clientset does.
kube::codegen::gen_client \
    --with-watch \
    --prefers-protobuf \
    --with-applyconfig \
    --applyconfig-openapi-schema <(go run ./hack/models-schema) \
    --applyconfig-externals "k8s.io/api/autoscaling/v1.Scale:k8s.io/client-go/applyconfigurations/autoscaling/v1" \
    --output-dir "${ROOT}/pkg/generated" \
    --output-pkg "${MODULE}/pkg/generated" \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/pkg/apis"
