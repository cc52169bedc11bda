#!/usr/bin/env bash
# Installs the Debian packages the local cluster's real node needs, when run as root on a
# machine with apt-get: containerd (and runc) as the container runtime, iptables for kube-proxy
# and the bridge network's masquerading, debootstrap to build the engine images, and
# postgresql-client-15 (psql) for the tests that connect to a real database. Only missing
# packages are installed. Elsewhere (not root, no apt-get) it says why it does nothing and exits
# 0: the local cluster then runs its simulated node alone.
set -o errexit -o nounset -o pipefail

packages=(containerd runc iptables debootstrap postgresql-client-15)

if [[ $(id -u) != 0 ]]; then
  echo "install-node-deps: not root: the real node is not set up (the local cluster keeps its simulated node)"
  exit 0
fi
if ! command -v apt-get >/dev/null || ! command -v dpkg-query >/dev/null; then
  echo "install-node-deps: no apt-get: install ${packages[*]} by hand for the real node"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if [[ $(dpkg-query -W -f='${Status}' "${p}" 2>/dev/null) != "install ok installed" ]]; then
    missing+=("${p}")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-node-deps: up to date (${packages[*]})"
  exit 0
fi

start=${SECONDS}
echo "install-node-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-node-deps: installed ${missing[*]} in $((SECONDS - start))s"
