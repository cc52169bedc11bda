#!/usr/bin/env bash
# Fails when generated code is stale: regenerates into a copy of the tree and
# diffs it against the checkout. Also checks that the module cache is intact
# (a generator writing into it would go unnoticed otherwise).
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
WORK="$(mktemp -d)"
trap 'rm -rf "${WORK}"' EXIT

# Copy the tracked and untracked-but-not-ignored files, then regenerate there.
(cd "${ROOT}" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "${WORK}")
mkdir -p "${WORK}/bin" && [ -d "${ROOT}/bin/codegen" ] && cp -a "${ROOT}/bin/codegen" "${WORK}/bin/" || true
(cd "${WORK}" && ./hack/update-codegen.sh >/dev/null)

status=0
for dir in pkg hack; do
    diff -Naupr "${ROOT}/${dir}" "${WORK}/${dir}" -x codegen || status=$?
done
if [ "${status}" -ne 0 ]; then
    echo "generated code is out of date: run hack/update-codegen.sh" >&2
    exit 1
fi
(cd "${ROOT}" && go mod verify >/dev/null)
echo "generated code is up to date"
