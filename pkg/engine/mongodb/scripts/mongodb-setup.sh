#!/bin/bash
# Runs in the init container of every MongoDB Pod of a Database, before the server, on the same
# image. It copies the replica set's shared key from KEYFILE_SOURCE (the credentials Secret's
# "keyfile", mounted 0440 with the server's group: a Secret volume gives its files no other
# owner than root) to KEYFILE on an emptyDir, owned by the server user that runs this script,
# mode 0400: mongod refuses a keyfile that its group or others may read
# (https://www.mongodb.com/docs/manual/core/security-internal-authentication/#keyfiles).
# Environment: KEYFILE_SOURCE, KEYFILE.
set -o errexit -o nounset -o pipefail

if [[ ! -s ${KEYFILE_SOURCE} ]]; then
	echo "mongodb-setup: the keyfile ${KEYFILE_SOURCE} is missing or empty" >&2
	exit 1
fi
# A copy from an earlier start of this Pod is read-only: replace it.
rm -f "${KEYFILE}"
install -m 0400 "${KEYFILE_SOURCE}" "${KEYFILE}"
echo "mongodb-setup: keyfile ready at ${KEYFILE}"
