#!/bin/bash
# Runs in the init container of every PostgreSQL Pod of a Database, before the server, on the
# same image and data volume. It decides the Pod's part from the primary the controller names
# in /etc/database/primary:
#   - the primary with an empty data directory: nothing; the image's entrypoint initialises it
#     (the controller then creates the replication role);
#   - any other Pod with an empty data directory: a copy of the primary's, taken with
#     pg_basebackup through its replication slot, set up as a hot standby that follows it;
#   - any other Pod with data: a hot standby that follows the primary, with the connection
#     settings written again (the replication password may have changed); that makes a primary
#     the controller switched away from (shut down cleanly first) a standby of the new one.
# Standbys reach the primary through the client Service, which routes to the Pod the
# controller labels primary, so they follow a switchover without being set up again.
# Environment: PGDATA, PGPORT, PRIMARY_HOST (the client Service's fully qualified DNS name),
# PRIMARY_CONNECT_TIMEOUT (seconds), REPLICATION_USER,
# REPLICATION_PASSWORD_FILE (the credentials Secret's key, mounted), REPLICATION_PASSFILE (the
# password file to write, on the data volume), HOSTNAME (the Pod's name).
set -o errexit -o nounset -o pipefail

replication_password=$(<"${REPLICATION_PASSWORD_FILE}")

me=${HOSTNAME}
primary=$(</etc/database/primary)
# One physical replication slot per Pod on the primary, named after the Pod ("db-1" → "db_1":
# slot names take lower-case letters, digits and underscores). The controller creates them.
slot=${me//-/_}

# write_passfile writes REPLICATION_PASSFILE, the libpq password file the WAL receiver reads
# the replication password from: one line "*:*:*:<user>:<password>" with \ and : escaped by \,
# mode 0600 (libpq ignores a password file its group or others may read;
# https://www.postgresql.org/docs/current/libpq-pgpass.html). primary_conninfo names it and
# holds no password: the server logs a primary_conninfo that a reload changes, value and all.
write_passfile() {
	if [[ ${replication_password} == *$'\n'* || ${REPLICATION_USER} == *$'\n'* ]]; then
		echo "postgresql-setup: the replication user or password holds a line break, which a password file cannot hold" >&2
		exit 1
	fi
	local user=${REPLICATION_USER//\\/\\\\} password=${replication_password//\\/\\\\}
	user=${user//:/\\:}
	password=${password//:/\\:}
	(umask 077 && printf '*:*:*:%s:%s\n' "${user}" "${password}" >"${REPLICATION_PASSFILE}.new")
	mv "${REPLICATION_PASSFILE}.new" "${REPLICATION_PASSFILE}"
}

# follow makes the data directory a hot standby of the primary: standby.signal, the password
# file, and the connection and slot in postgresql.auto.conf, which replace any earlier ones
# (https://www.postgresql.org/docs/current/runtime-config-replication.html#RUNTIME-CONFIG-REPLICATION-STANDBY).
follow() {
	local conf=${PGDATA}/postgresql.auto.conf
	touch "${conf}"
	sed -i -e '/^primary_conninfo[[:space:]]*=/d' -e '/^primary_slot_name[[:space:]]*=/d' "${conf}"
	write_passfile
	cat >>"${conf}" <<CONF
primary_conninfo = 'host=${PRIMARY_HOST} port=${PGPORT} user=${REPLICATION_USER} passfile=${REPLICATION_PASSFILE} application_name=${me} connect_timeout=${PRIMARY_CONNECT_TIMEOUT}'
primary_slot_name = '${slot}'
CONF
	touch "${PGDATA}/standby.signal"
}

if [[ -s ${PGDATA}/PG_VERSION ]]; then
	if [[ ${me} != "${primary}" ]]; then
		if [[ ! -e ${PGDATA}/standby.signal ]]; then
			echo "postgresql-setup: ${primary} is the primary: ${me} follows it as a standby"
		fi
		# Written again at every start: the replication password may have changed.
		follow
	fi
	exit 0
fi
if [[ ${me} == "${primary}" ]]; then
	exit 0
fi

# Cloned into a sibling directory and renamed, so a clone cut short is never taken for data.
clone=${PGDATA}.clone
echo "postgresql-setup: cloning ${primary} through ${PRIMARY_HOST} (slot ${slot})"
until PGPASSWORD=${replication_password} pg_basebackup --pgdata="${clone}" --host="${PRIMARY_HOST}" \
	--port="${PGPORT}" --username="${REPLICATION_USER}" --no-password --wal-method=stream \
	--slot="${slot}" --checkpoint=fast; do
	rm -rf "${clone}"
	echo "postgresql-setup: the primary cannot be cloned yet; retrying in 5s"
	sleep 5
done
rm -rf "${PGDATA}"
mv "${clone}" "${PGDATA}"
follow
echo "postgresql-setup: ${me} is a standby of ${primary}"
