#!/usr/bin/env bash
# Builds the pinned control-plane binaries the local cluster and the e2e tests run:
#   bin/k8s-<version>/{kube-apiserver,kube-controller-manager,kube-scheduler}  (hack/tools)
#   bin/kwok-<version>/kwok and bin/kwok-<version>/stages/*.yaml                 (hack/tools/kwok)
# and, for the local cluster's real node (internal/localcluster runs it only as root):
#   bin/k8s-<version>/{kubelet,kube-proxy}                                      (hack/tools)
#   bin/cni-<version>/{bridge,host-local,loopback,portmap}                      (hack/tools/cni)
#   bin/crane-<version>/crane (image registry on loopback, image builds)        (hack/tools/crane)
#   bin/coredns-<version>/coredns (cluster DNS)                                 (hack/tools/coredns)
# Versions come from the tools modules' go.mod files. A binary is rebuilt only when it is missing
# or was built from another version (read back with `go version -m`). A cold build of
# kube-apiserver takes about 6 minutes on 2 cores. The real node's binaries are built as root
# only (the node needs root); NODE_TOOLS=1 builds them anyway, NODE_TOOLS=0 never.
#
# Usage: hack/build-tools.sh [all|control-plane|node]
#   all (the default)  everything above
#   control-plane      kube-apiserver, kube-controller-manager, kube-scheduler and kwok: what the
#                      control plane and its simulated node run
#   node               the real node's binaries only (kubelet, kube-proxy, CNI, crane, CoreDNS)
set -o errexit -o nounset -o pipefail
MODE=${1:-all}
case ${MODE} in
  all | control-plane | node) ;;
  *) echo "usage: $0 [all|control-plane|node]" >&2; exit 2 ;;
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
# Lower priority: the machine's cores are shared with editors and tests.
NICE=${NICE:-nice -n 10}

# module_version <module dir> <module path> prints the version the tools module pins.
module_version() {
  (cd "$1" && ${GO} list -m -f '{{.Version}}' "$2")
}

# build_cmd <module dir> <module path> <version> <package> <output> [<ldflags>]: builds unless
# <output> already records <module path> at <version> and, with <ldflags> (which stamp the
# version), reports <version> from --version.
build_cmd() {
  local dir=$1 mod=$2 version=$3 pkg=$4 out=$5 ldflags=${6:-} why
  if [[ ! -x ${out} ]]; then
    why="missing"
  elif ! ${GO} version -m "${out}" | awk -v m="${mod}" -v v="${version}" \
      '($1 == "mod" || $1 == "dep") && $2 == m && $3 == v { found = 1 } END { exit !found }'; then
    why="not built from ${mod} ${version}"
  elif [[ -n ${ldflags} ]] && ! "${out}" --version 2>/dev/null | grep -qF -- "${version}"; then
    # -trimpath keeps ldflags out of the build info: ask the binary itself.
    why="not stamped with its version"
  else
    echo "up to date: ${out#"${ROOT}/"} (${mod} ${version})"
    return 0
  fi
  echo "building ${out#"${ROOT}/"} from ${pkg} (${why}); a cold build takes minutes"
  mkdir -p "$(dirname "${out}")"
  local start=${SECONDS}
  (cd "${dir}" && ${NICE} ${GO} build -trimpath -ldflags="${ldflags}" -o "${out}.tmp" "${pkg}")
  mv "${out}.tmp" "${out}"
  echo "built ${out#"${ROOT}/"} in $((SECONDS - start))s"
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
k8s_cmds=()
[[ ${MODE} == node ]] || k8s_cmds+=(kube-apiserver kube-controller-manager kube-scheduler)
[[ ${NODE_TOOLS} == 0 ]] || k8s_cmds+=(kubelet kube-proxy)
for cmd in "${k8s_cmds[@]+"${k8s_cmds[@]}"}"; do
  build_cmd "${k8s_dir}" k8s.io/kubernetes "${k8s_version}" "k8s.io/kubernetes/cmd/${cmd}" \
    "${BIN}/k8s-${k8s_version}/${cmd}" "${k8s_ldflags}"
done

if [[ ${MODE} != node ]]; then
  kwok_dir=${ROOT}/hack/tools/kwok
  kwok_version=$(module_version "${kwok_dir}" sigs.k8s.io/kwok)
  kwok_out=${BIN}/kwok-${kwok_version}
  build_cmd "${kwok_dir}" sigs.k8s.io/kwok "${kwok_version}" sigs.k8s.io/kwok/cmd/kwok "${kwok_out}/kwok"

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
for plugin in main/bridge ipam/host-local main/loopback meta/portmap; do
  build_cmd "${cni_dir}" "${cni_mod}" "${cni_version}" "${cni_mod}/plugins/${plugin}" \
    "${BIN}/cni-${cni_version}/$(basename "${plugin}")"
done

crane_dir=${ROOT}/hack/tools/crane
crane_mod=github.com/google/go-containerregistry
crane_version=$(module_version "${crane_dir}" "${crane_mod}")
build_cmd "${crane_dir}" "${crane_mod}" "${crane_version}" "${crane_mod}/cmd/crane" \
  "${BIN}/crane-${crane_version}/crane"

# CoreDNS, the real node's cluster DNS: its own module (it pins its own Kubernetes client).
coredns_dir=${ROOT}/hack/tools/coredns
coredns_mod=github.com/coredns/coredns
coredns_version=$(module_version "${coredns_dir}" "${coredns_mod}")
build_cmd "${coredns_dir}" "${coredns_mod}" "${coredns_version}" "${coredns_mod}" \
  "${BIN}/coredns-${coredns_version}/coredns"
