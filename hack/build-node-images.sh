#!/usr/bin/env bash
# Builds the images the local cluster's real node runs, as docker-style image tarballs that
# internal/localcluster pushes into its loopback registry at start:
#   bin/images/pause.tar     the Pod sandbox (hack/pause), pushed as localcluster/pause:1
#   bin/images/postgres.tar  PostgreSQL 15 from Debian's postgresql-15 on a debootstrap root
#                            file system, with our entrypoint (hack/images/postgres), pushed
#                            as library/postgres:15 and library/postgres:<Debian's 15.x>
# Next to each tarball, <name>.tags lists the repository:tag names it is pushed as, and
# <name>.key the hash of its inputs: an image is rebuilt only when its inputs change. The
# PostgreSQL image's Debian layer is cached apart (bin/images/cache), so a change of the
# entrypoint alone rebuilds in seconds.
#
# Needs root (debootstrap and chroot), debootstrap (hack/install-node-deps.sh) and crane
# (hack/build-tools.sh). Not root: it says so and builds nothing, and the local cluster runs
# its simulated node alone. A cold PostgreSQL image takes one to seven minutes (nearly all of
# it debootstrap downloading and unpacking packages, slower on a loaded machine). DEBIAN_MIRROR picks the mirror (default: the
# first of this machine's apt sources, else deb.debian.org).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}
BIN=${BIN:-${ROOT}/bin}
OUT=${BIN}/images
NICE=${NICE:-nice -n 10}
# shellcheck source=hack/lib.sh
source "${ROOT}/hack/lib.sh"

if [[ $(id -u) != 0 ]]; then
  echo "build-node-images: not root: no images for the real node (the local cluster keeps its simulated node)"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "build-node-images: debootstrap missing: run hack/install-node-deps.sh" >&2; exit 1; }
crane_version=$(cd "${ROOT}/hack/tools/crane" && ${GO} list -m -f '{{.Version}}' github.com/google/go-containerregistry)
CRANE=${BIN}/crane-${crane_version}/crane
[[ -x ${CRANE} ]] || { echo "build-node-images: ${CRANE} missing: run hack/build-tools.sh" >&2; exit 1; }

suite=bookworm
pg_major=15
arch=$(${GO} env GOARCH)
pg_packages=postgresql-${pg_major},postgresql-client-${pg_major}
pg_bin=/usr/lib/postgresql/${pg_major}/bin
mirror=${DEBIAN_MIRROR:-}
if [[ -z ${mirror} ]]; then
  mirror=$(grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
    | awk '{print $2; exit}' || true)
  mirror=${mirror:-http://deb.debian.org/debian}
fi

mkdir -p "${OUT}"
work=$(mktemp -d "${OUT}/.build.XXXXXX")
registry_pid=
cleanup() {
  if [[ -n ${registry_pid} ]]; then
    kill "${registry_pid}" 2>/dev/null || true
    wait "${registry_pid}" 2>/dev/null || true
  fi
  # debootstrap may leave the chroot's /proc and /sys mounted when it fails.
  local m
  for m in $(awk -v w="${work}" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r); do
    umount -l "${m}" || true
  done
  rm -rf "${work}"
}
trap cleanup EXIT

# key <files...> hashes this script and the given inputs, and the build's settings.
key() {
  { cat "${BASH_SOURCE[0]}" "$@"; echo "${suite} ${pg_packages}"; } | sha256sum | cut -c1-16
}

# up_to_date <name> <key>: the tarball exists and was built from these inputs.
up_to_date() {
  [[ -s ${OUT}/$1.tar && -s ${OUT}/$1.tags && $(cat "${OUT}/$1.key" 2>/dev/null) == "$2" ]]
}

# A throwaway registry on loopback: crane mutates images only in a registry.
start_registry() {
  [[ -n ${registry_pid} ]] && return 0
  "${CRANE}" registry serve --address 127.0.0.1:0 2>"${work}/registry.log" &
  registry_pid=$!
  local port=
  for _ in $(seq 50); do
    port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "${work}/registry.log")
    [[ -n ${port} ]] && break
    sleep 0.1
  done
  [[ -n ${port} ]] || { cat "${work}/registry.log" >&2; echo "build-node-images: the registry did not start" >&2; exit 1; }
  registry=127.0.0.1:${port}
}

# crane_q runs crane with its progress log in the build's crane.log, shown when it fails.
crane_q() {
  "${CRANE}" "$@" >/dev/null 2>>"${work}/crane.log" || { tail -20 "${work}/crane.log" >&2; return 1; }
}

# save <name> <key> <tags...>: pulls the first tag from the registry into <name>.tar, then
# records the tags and the key.
save() {
  local name=$1 k=$2
  shift 2
  "${CRANE}" pull "${registry}/$1" "${work}/${name}.tar" 2>>"${work}/crane.log"
  mv "${work}/${name}.tar" "${OUT}/${name}.tar"
  printf '%s\n' "$@" >"${OUT}/${name}.tags"
  echo "${k}" >"${OUT}/${name}.key"
}

# --- pause ---
pause_key=$(key "${ROOT}/hack/pause/main.go")
if up_to_date pause "${pause_key}"; then
  echo "up to date: bin/images/pause.tar"
else
  start=${SECONDS}
  start_registry
  mkdir -p "${work}/pause"
  (cd "${ROOT}" && CGO_ENABLED=0 ${NICE} ${GO} build -trimpath -o "${work}/pause/pause" ./hack/pause)
  tar -C "${work}/pause" -cf "${work}/pause.layer.tar" pause
  crane_q append --oci-empty-base -f "${work}/pause.layer.tar" -t "${registry}/localcluster/pause:build"
  crane_q mutate "${registry}/localcluster/pause:build" --entrypoint=/pause --set-platform="linux/${arch}" --user=65535:65535 \
    -t "${registry}/localcluster/pause:1"
  save pause "${pause_key}" localcluster/pause:1
  echo "built bin/images/pause.tar in $((SECONDS - start))s"
fi

# --- postgres ---
# Two layers: the Debian root file system with the server (bin/images/cache/postgres-base.tar,
# rebuilt only when base_recipe, the suite or the packages change: debootstrap is the slow
# part), and the entrypoint on top.
base_recipe=1 # bump when the base's preparation below changes
base_key=$( { echo "${base_recipe} ${suite} ${pg_packages} ${arch}"; } | sha256sum | cut -c1-16)
entrypoint=${ROOT}/hack/images/postgres/docker-entrypoint.sh
pg_key=$(echo "$(key "${entrypoint}") ${base_key}" | sha256sum | cut -c1-16)
if up_to_date postgres "${pg_key}"; then
  echo "up to date: bin/images/postgres.tar ($(tr '\n' ' ' <"${OUT}/postgres.tags"))"
  exit 0
fi
start=${SECONDS}
start_registry
mkdir -p "${OUT}/cache"
base_tar=${OUT}/cache/postgres-base.tar
if [[ -s ${base_tar} && -s ${base_tar}.pg-version && $(cat "${base_tar}.key" 2>/dev/null) == "${base_key}" ]]; then
  echo "up to date: bin/images/cache/postgres-base.tar"
  crane_q push "${base_tar}" "${registry}/library/postgres:base"
else
  rootfs=${work}/rootfs
  echo "building bin/images/cache/postgres-base.tar: debootstrap ${suite} with ${pg_packages} from ${mirror}"
  ${NICE} debootstrap --variant=minbase --include="${pg_packages}" "${suite}" "${rootfs}" "${mirror}" \
    >"${work}/debootstrap.log" 2>&1 || { tail -30 "${work}/debootstrap.log" >&2; exit 1; }
  echo "debootstrap done in $((SECONDS - start))s"

  # The server user at uid/gid 999, as in the official images, so a Pod's fsGroup and
  # runAsUser hold for both. Debian's packages gave it the next free system ids; its files
  # move along.
  old_uid=$(chroot "${rootfs}" id -u postgres)
  old_gid=$(chroot "${rootfs}" id -g postgres)
  chroot "${rootfs}" groupmod -g 999 postgres
  chroot "${rootfs}" usermod -u 999 -g 999 postgres
  find "${rootfs}" -xdev -uid "${old_uid}" -exec chown -h 999 {} +
  find "${rootfs}" -xdev -gid "${old_gid}" -exec chgrp -h 999 {} +

  # What the image does not need: the package's own cluster (the entrypoint makes one in
  # PGDATA), downloaded packages, package lists, documentation.
  rm -rf "${rootfs}/var/lib/postgresql/${pg_major}" "${rootfs}/etc/postgresql/${pg_major}" \
    "${rootfs}/var/cache/apt/archives/"*.deb "${rootfs}/var/lib/apt/lists/"* \
    "${rootfs}/usr/share/doc" "${rootfs}/usr/share/man" "${rootfs}/usr/share/info"
  install -d -o 999 -g 999 -m 0755 "${rootfs}/var/lib/postgresql" "${rootfs}/var/run/postgresql"
  install -d -o 999 -g 999 -m 0700 "${rootfs}/var/lib/postgresql/data"
  install -d -m 0755 "${rootfs}/docker-entrypoint-initdb.d"
  chroot "${rootfs}" "${pg_bin}/postgres" --version | awk '{print $3}' >"${work}/pg-version"

  tar --numeric-owner -C "${rootfs}" -cf "${work}/base.layer.tar" .
  rm -rf "${rootfs}"
  crane_q append --oci-empty-base -f "${work}/base.layer.tar" -t "${registry}/library/postgres:base"
  rm -f "${work}/base.layer.tar"
  "${CRANE}" pull "${registry}/library/postgres:base" "${work}/base.tar" 2>>"${work}/crane.log"
  mv "${work}/base.tar" "${base_tar}"
  mv "${work}/pg-version" "${base_tar}.pg-version"
  echo "${base_key}" >"${base_tar}.key"
  echo "built bin/images/cache/postgres-base.tar in $((SECONDS - start))s"
fi

pg_version=$(cat "${base_tar}.pg-version")
[[ ${pg_version} == "${pg_major}".* ]] || { echo "build-node-images: unexpected server version '${pg_version}'" >&2; exit 1; }
mkdir -p "${work}/top/usr/local/bin"
install -m 0755 "${entrypoint}" "${work}/top/usr/local/bin/docker-entrypoint.sh"
tar --numeric-owner --owner=0 --group=0 -C "${work}/top" -cf "${work}/top.layer.tar" usr
crane_q append -b "${registry}/library/postgres:base" -f "${work}/top.layer.tar" -t "${registry}/library/postgres:build"
crane_q mutate "${registry}/library/postgres:build" \
  --entrypoint=/usr/local/bin/docker-entrypoint.sh --cmd=postgres \
  --env="PATH=${pg_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --env=PGDATA=/var/lib/postgresql/data --env=LANG=C.UTF-8 --env=PG_MAJOR=${pg_major} \
  --env=PG_VERSION="${pg_version}" --exposed-ports=5432/tcp --set-platform="linux/${arch}" \
  -t "${registry}/library/postgres:${pg_major}"
save postgres "${pg_key}" "library/postgres:${pg_major}" "library/postgres:${pg_version}"
echo "built bin/images/postgres.tar (PostgreSQL ${pg_version}) in $((SECONDS - start))s"
