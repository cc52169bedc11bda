#!/usr/bin/env bash
# Builds what the local cluster needs, its real node included: the binaries (hack/build-tools.sh:
# the control plane's, and as root the real node's) and, as root, the real node's images
# (hack/build-node-images.sh). The images need only crane, so crane is built first; then the
# images (debootstrap: mostly downloads and dpkg; SeaweedFS: the compiler) and the binaries (the
# compiler) are built at the same time, their lines interleaved. What is up to date is skipped:
# `make run` has built the control plane's binaries before it runs this. When the binaries fail
# the image build is stopped (SIGTERM to its process group: it unmounts and removes what it
# made); either failure is an exit status of 1. `make node` runs it; local-up runs it as
# REAL_NODE_BUILD (the Makefile's default) and stops it with SIGTERM to its process group.
set -o errexit -o nounset -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [[ $(id -u) != 0 ]]; then
  echo "build-real-node: not root: no real node; the control plane's tools only"
  exec "${ROOT}/hack/build-tools.sh"
fi

"${ROOT}/hack/build-tools.sh" crane
# The image build in a process group of its own, so that stopping it reaches debootstrap and
# dpkg too; a SIGTERM or SIGINT to this script (local-up stops its whole group) passes it on.
setsid "${ROOT}/hack/build-node-images.sh" &
images=$!
stop_images() {
  kill -TERM -- "-${images}" 2>/dev/null || true
  wait "${images}" || true
}
trap 'stop_images; exit 143' TERM INT
if ! "${ROOT}/hack/build-tools.sh"; then
  echo "build-real-node: hack/build-tools.sh failed; stopping the image build" >&2
  stop_images
  exit 1
fi
if ! wait "${images}"; then
  echo "build-real-node: hack/build-node-images.sh failed" >&2
  exit 1
fi
