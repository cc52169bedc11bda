#!/usr/bin/env bash
# Puts Debian's Prometheus, the programs of its package "prometheus" (prometheus and promtool),
# in bin/prometheus/, for test/alerts (promtool check rules and test rules on
# artifacts/monitoring). The package is downloaded (apt-get download) and unpacked there
# (dpkg -x): nothing is installed and no service starts. Kept once fetched; bin/prometheus/VERSION
# says which version. Needs apt-get and dpkg (Debian, Ubuntu); elsewhere put promtool in
# bin/prometheus/ by hand.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-${ROOT}/bin}
OUT=${BIN}/prometheus

if [[ -x ${OUT}/promtool && -s ${OUT}/VERSION ]]; then
  echo "up to date: ${OUT#"${ROOT}/"} (prometheus $(cat "${OUT}/VERSION"))"
  exit 0
fi
for cmd in apt-get dpkg dpkg-deb; do
  command -v "${cmd}" >/dev/null || { echo "fetch-prometheus: no ${cmd}: put promtool in ${OUT}/ by hand" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
# apt-get download needs the package lists; a fresh machine may have none yet.
if ! (cd "${work}" && apt-get download -qq prometheus 2>"${work}/download.log"); then
  if [[ $(id -u) != 0 ]]; then
    cat "${work}/download.log" >&2
    echo "fetch-prometheus: apt-get download prometheus failed; as root it would update the package lists first" >&2
    exit 1
  fi
  apt-get update -qq
  (cd "${work}" && apt-get download -qq prometheus)
fi
deb=$(ls "${work}"/prometheus_*.deb)
dpkg -x "${deb}" "${work}/root"
mkdir -p "${OUT}"
install -m 0755 "${work}/root/usr/bin/prometheus" "${work}/root/usr/bin/promtool" "${OUT}/"
dpkg-deb -f "${deb}" Version >"${OUT}/VERSION"
echo "fetched ${OUT#"${ROOT}/"}: prometheus and promtool $(cat "${OUT}/VERSION") (Debian's package, unpacked)"
