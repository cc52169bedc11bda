#!/usr/bin/env bash
# Builds the pinned control-plane binaries the local cluster and the e2e tests run:
#   bin/k8s-<version>/{kube-apiserver,kube-controller-manager,kube-scheduler}  (hack/tools)
#   bin/kwok-<version>/kwok and bin/kwok-<version>/stages/*.yaml                 (hack/tools/kwok)
# and, for the local cluster's real node (internal/localcluster runs it only as root):
#   bin/k8s-<version>/{kubelet,kube-proxy}                                      (hack/tools)
#   bin/cni-<version>/{bridge,host-local,loopback,portmap}                      (hack/tools/cni)
#   bin/crane-<version>/crane (image registry on loopback, image builds)        (hack/tools/crane)
#   bin/coredns-<version>/coredns (cluster DNS, the plugins it needs)            (hack/tools/coredns)
# Versions come from the tools modules' go.mod files. A binary is rebuilt only when it is missing
# or was built from another version (read back with `go version -m`). A cold build of
# kube-apiserver, kube-controller-manager and kube-scheduler together takes about 9 minutes on
# 2 idle cores. The real node's binaries are built as root
# only (the node needs root); NODE_TOOLS=1 builds them anyway, NODE_TOOLS=0 never.
#
# Usage: hack/build-tools.sh [all|control-plane|node|crane]
#   all (the default)  everything above
#   control-plane      kube-apiserver, kube-controller-manager, kube-scheduler and kwok: what the
#                      control plane and its simulated node run
#   node               the real node's binaries only (crane, kubelet, kube-proxy, CNI, CoreDNS)
#   crane              crane only: what hack/build-node-images.sh needs
set -o errexit -o nounset -o pipefail
MODE=${1:-all}
case ${MODE} in
  all | control-plane | node | crane) ;;
  *) echo "usage: $0 [all|control-plane|node|crane]" >&2; exit 2 ;;
esac
if [[ -z ${NODE_TOOLS:-} ]]; then
  NODE_TOOLS=0
  [[ $(id -u) == 0 ]] && NODE_TOOLS=1
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}
BIN=${BIN:-${ROOT}/bin}
# shellcheck source=hack/lib.sh
source "${ROOT}/hack/lib.sh"
build_lock "${BIN}/.build-tools.lock" build-tools
# Lower priority: the machine's cores are shared with editors and tests.
NICE=${NICE:-nice -n 10}
# The directory a build_cmds is writing, removed when the script exits (a failed build, or
# SIGTERM from local-up stopping a real node's build).
build_tmp=
trap '[[ -z ${build_tmp} ]] || rm -rf "${build_tmp}"' EXIT

# module_version <module dir> <module path> prints the version the tools module pins.
module_version() {
  (cd "$1" && ${GO} list -m -f '{{.Version}}' "$2")
}

# stale <package> <module path> <version> <output> [<ldflags>] prints why <output> must be
# built, nothing when it is the command <package> built with <module path> at <version> and,
# with <ldflags> (which stamp the version), reports <version> from --version.
stale() {
  local pkg=$1 mod=$2 version=$3 out=$4 ldflags=${5:-} info
  if [[ ! -x ${out} ]]; then
    echo "missing"
    return
  fi
  info=$(${GO} version -m "${out}")
  if ! awk -v p="${pkg}" '$1 == "path" && $2 == p { found = 1 } END { exit !found }' <<<"${info}"; then
    echo "not the command ${pkg}"
  elif ! awk -v m="${mod}" -v v="${version}" \
      '($1 == "mod" || $1 == "dep") && $2 == m && $3 == v { found = 1 } END { exit !found }' <<<"${info}"; then
    echo "not built from ${mod} ${version}"
  elif [[ -n ${ldflags} ]] && ! "${out}" --version 2>/dev/null | grep -qF -- "${version}"; then
    # -trimpath keeps ldflags out of the build info: ask the binary itself.
    echo "not stamped with its version"
  fi
}

# build_cmds <module dir> <module path> <version> <output dir> <ldflags> <package>...: builds
# each <package> whose <output dir>/<last element of package> is stale, all in one `go build`,
# so the go command links them in parallel and compiles what they share once. As Kubernetes'
# release builds (hack/lib/golang.sh), -s -w leaves out the symbol table and DWARF: linking
# is faster, and stack traces and pprof profiles keep their function names (pclntab).
build_cmds() {
  local dir=$1 mod=$2 version=$3 outdir=$4 ldflags=$5 pkg out why
  shift 5
  local pkgs=()
  for pkg in "$@"; do
    out=${outdir}/${pkg##*/}
    why=$(stale "${pkg}" "${mod}" "${version}" "${out}" "${ldflags}")
    if [[ -z ${why} ]]; then
      echo "up to date: ${out#"${ROOT}/"} (${mod} ${version})"
      continue
    fi
    echo "building ${out#"${ROOT}/"} from ${pkg} (${why}); a cold build takes minutes"
    pkgs+=("${pkg}")
  done
  [[ ${#pkgs[@]} == 0 ]] && return 0
  local start=${SECONDS} tmp
  mkdir -p "${outdir}"
  tmp=$(mktemp -d "${outdir}/.build.XXXXXX")
  build_tmp=${tmp}
  # A directory with a trailing slash: go build writes every command into it, by its name.
  (cd "${dir}" && ${NICE} ${GO} build -trimpath -ldflags="-s -w ${ldflags}" -o "${tmp}/" "${pkgs[@]}") \
    || return 1
  for pkg in "${pkgs[@]}"; do
    mv "${tmp}/${pkg##*/}" "${outdir}/${pkg##*/}"
  done
  rmdir "${tmp}"
  build_tmp=
  echo "built ${pkgs[*]##*/} in $((SECONDS - start))s"
}

k8s_dir=${ROOT}/hack/tools
k8s_version=$(module_version "${k8s_dir}" k8s.io/kubernetes)
# Stamp the version the way Kubernetes' release builds do, so /version (and so
# `kubectl version`) reports v1.37.2 instead of the unparsable default.
k8s_minor=${k8s_version#v*.}; k8s_minor=${k8s_minor%%.*}
k8s_major=${k8s_version#v}; k8s_major=${k8s_major%%.*}
version_pkg=k8s.io/component-base/version
k8s_ldflags="-X ${version_pkg}.gitVersion=${k8s_version} -X ${version_pkg}.gitMajor=${k8s_major} -X ${version_pkg}.gitMinor=${k8s_minor} -X ${version_pkg}.gitTreeState=clean"
[[ ${MODE} == control-plane ]] && NODE_TOOLS=0
[[ ${MODE} == crane ]] && NODE_TOOLS=1
# crane first: hack/build-real-node.sh builds the images, which need only crane, while the
# rest of the real node's binaries compile.
if [[ ${NODE_TOOLS} == 1 && ${MODE} != control-plane ]]; then
  crane_dir=${ROOT}/hack/tools/crane
  crane_mod=github.com/google/go-containerregistry
  crane_version=$(module_version "${crane_dir}" "${crane_mod}")
  build_cmds "${crane_dir}" "${crane_mod}" "${crane_version}" "${BIN}/crane-${crane_version}" "" "${crane_mod}/cmd/crane"
fi
[[ ${MODE} == crane ]] && exit 0

k8s_cmds=()
[[ ${MODE} == all || ${MODE} == control-plane ]] && k8s_cmds+=(kube-apiserver kube-controller-manager kube-scheduler)
[[ ${NODE_TOOLS} == 0 ]] || k8s_cmds+=(kubelet kube-proxy)
if [[ ${#k8s_cmds[@]} -gt 0 ]]; then
  build_cmds "${k8s_dir}" k8s.io/kubernetes "${k8s_version}" "${BIN}/k8s-${k8s_version}" "${k8s_ldflags}" \
    "${k8s_cmds[@]/#/k8s.io/kubernetes/cmd/}"
fi

if [[ ${MODE} == all || ${MODE} == control-plane ]]; then
  kwok_dir=${ROOT}/hack/tools/kwok
  kwok_version=$(module_version "${kwok_dir}" sigs.k8s.io/kwok)
  kwok_out=${BIN}/kwok-${kwok_version}
  build_cmds "${kwok_dir}" sigs.k8s.io/kwok "${kwok_version}" "${kwok_out}" "" sigs.k8s.io/kwok/cmd/kwok

  # kwok's own stage files (what its kustomize/stage/fast set uses: node initialize and lease
  # heartbeat, fast pod lifecycle; plus the fast volume lifecycle and its kwok-volume
  # StorageClass), copied from its module so the local cluster reads them next to the binary.
  kwok_src=$(cd "${kwok_dir}" && module_dir sigs.k8s.io/kwok)
  stages=${kwok_out}/stages
  if [[ ! -f ${stages}/.complete ]]; then
    echo "copying kwok ${kwok_version} stages into ${stages#"${ROOT}/"}"
    rm -rf "${stages}"
    mkdir -p "${stages}"
    for set in node/fast node/heartbeat-with-lease pod/fast volume/fast; do
      for f in "${kwok_src}/kustomize/stage/${set}/"*.yaml; do
        [[ $(basename "${f}") == kustomization.yaml ]] && continue
        install -m 0644 "${f}" "${stages}/$(basename "${f}")"
      done
    done
    touch "${stages}/.complete"
  fi
fi

[[ ${NODE_TOOLS} == 0 ]] && exit 0

# The CNI plugins the real node's network configuration names, each its own command.
cni_dir=${ROOT}/hack/tools/cni
cni_mod=github.com/containernetworking/plugins
cni_version=$(module_version "${cni_dir}" "${cni_mod}")
build_cmds "${cni_dir}" "${cni_mod}" "${cni_version}" "${BIN}/cni-${cni_version}" "" \
  "${cni_mod}"/plugins/{main/bridge,ipam/host-local,main/loopback,meta/portmap}

# CoreDNS, the real node's cluster DNS, with only the plugins the local cluster's Corefile names:
# our main package in a module of its own (hack/tools/coredns/main.go). It selects k8s.io v0.37.2
# and golang.org/x as ours do, so those packages come from the build cache; grpc, protobuf and
# prometheus, which CoreDNS requires at newer versions than ours, are compiled again.
coredns_dir=${ROOT}/hack/tools/coredns
coredns_mod=github.com/coredns/coredns
coredns_version=$(module_version "${coredns_dir}" "${coredns_mod}")
build_cmds "${coredns_dir}" "${coredns_mod}" "${coredns_version}" "${BIN}/coredns-${coredns_version}" "" \
  example.com/database-apiserver/hack/tools/coredns
