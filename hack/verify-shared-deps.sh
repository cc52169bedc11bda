#!/usr/bin/env bash
# Fails when a module that both our binaries and the pinned Kubernetes binaries
# (hack/tools) or kwok (hack/tools/kwok) compile is selected at two different
# versions. At one version, and with all built -trimpath, every package they
# share (k8s.io/apiserver, client-go, etcd's client, grpc, ...) is compiled
# once and reused from the Go build cache, which is most of a cold `make run`.
# Raise the older side with `go get MODULE@VERSION` (in the tools module's
# folder for a tools module), then `go mod tidy`.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
GO=${GO:-go}
deps() { "${GO}" list -deps -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' "$@" | sort -u; }

ours="$(cd "${ROOT}" && deps ./cmd/... ./hack/local-up)"
# The commands tools.go records (it imports them only to keep go.mod tidy).
cmds="$(cd "${ROOT}/hack/tools" && sed -n 's/^[[:space:]]*_ "\(k8s.io\/kubernetes\/cmd\/[^"]*\)"$/\1/p' tools.go)"
# shellcheck disable=SC2086
tools="$(cd "${ROOT}/hack/tools" && deps ${cmds})"
kwok="$(cd "${ROOT}/hack/tools/kwok" && deps sigs.k8s.io/kwok/cmd/kwok)"

# compare <name> <modules>: the modules <name> shares with ours at another version.
compare() {
    join <(echo "${ours}") <(echo "$2") | awk -v n="$1" '$2 != $3 { print "  " $1 ": ours " $2 ", " n " " $3 }'
}
mismatch="$(compare hack/tools "${tools}"; compare hack/tools/kwok "${kwok}")"
if [[ -n "${mismatch}" ]]; then
    echo "modules at different versions in go.mod and a tools module's go.mod (each is compiled twice on a cold build):" >&2
    echo "${mismatch}" >&2
    exit 1
fi
echo "shared modules are at one version ($(join <(echo "${ours}") <(echo "${tools}") | wc -l) with hack/tools, $(join <(echo "${ours}") <(echo "${kwok}") | wc -l) with hack/tools/kwok)"
