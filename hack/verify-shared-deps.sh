#!/usr/bin/env bash
# Fails when a module that both our binaries and the pinned Kubernetes binaries
# (hack/tools) compile is selected at two different versions. At one version,
# and with both built -trimpath, every package they share (k8s.io/apiserver,
# client-go, etcd's client, grpc, ...) is compiled once and reused from the Go
# build cache, which is most of a cold `make run`. Raise the older side with
# `go get MODULE@VERSION` (in hack/tools for the tools module), then
# `go mod tidy`.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
GO=${GO:-go}
deps() { "${GO}" list -deps -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' "$@" | sort -u; }

ours="$(cd "${ROOT}" && deps ./cmd/... ./hack/local-up)"
# The commands tools.go records (it imports them only to keep go.mod tidy).
cmds="$(cd "${ROOT}/hack/tools" && sed -n 's/^[[:space:]]*_ "\(k8s.io\/kubernetes\/cmd\/[^"]*\)"$/\1/p' tools.go)"
# shellcheck disable=SC2086
tools="$(cd "${ROOT}/hack/tools" && deps ${cmds})"
mismatch="$(join <(echo "${ours}") <(echo "${tools}") | awk '$2 != $3 { print "  " $1 ": ours " $2 ", hack/tools " $3 }')"
if [[ -n "${mismatch}" ]]; then
    echo "modules at different versions in go.mod and hack/tools/go.mod (each is compiled twice on a cold build):" >&2
    echo "${mismatch}" >&2
    exit 1
fi
echo "shared modules are at one version ($(join <(echo "${ours}") <(echo "${tools}") | wc -l) modules)"
