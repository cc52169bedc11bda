#!/usr/bin/env bash
# Fails when generated code is stale: snapshots the checkout, regenerates into
# a second copy of the snapshot and diffs the two (a snapshot, so that edits
# made meanwhile in the checkout do not show as stale code). Also checks that
# the module cache is intact (a generator writing into it, as go-to-protobuf
# does when an --apimachinery-packages entry lacks its "-", would go unnoticed
# otherwise).
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
TMP="$(mktemp -d)"
trap 'rm -rf "${TMP}"' EXIT
mkdir -p "${TMP}/checkout"

# Copy the tracked and untracked-but-not-ignored files (less those deleted in
# the working tree), then regenerate in a copy of that.
(cd "${ROOT}" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do
        if [[ -e "${f}" || -L "${f}" ]]; then printf '%s\0' "${f}"; fi
    done | xargs -0 cp --parents -t "${TMP}/checkout")
cp -a "${TMP}/checkout" "${TMP}/regenerated"
if [[ -d "${ROOT}/bin/codegen" ]]; then
    mkdir -p "${TMP}/regenerated/bin" && cp -a "${ROOT}/bin/codegen" "${TMP}/regenerated/bin/"
fi
(cd "${TMP}/regenerated" && ./hack/update-codegen.sh >/dev/null)

status=0
for dir in pkg hack; do
    (cd "${TMP}" && diff -Naupr "checkout/${dir}" "regenerated/${dir}") || status=$?
done
if [[ "${status}" -ne 0 ]]; then
    echo "generated code is out of date: run hack/update-codegen.sh" >&2
    exit 1
fi
if ! (cd "${ROOT}" && go mod verify >/dev/null); then
    echo "go mod verify failed: a generator wrote into the module cache" >&2
    exit 1
fi
echo "generated code is up to date"
