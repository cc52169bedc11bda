#!/bin/bash
# Runs in the init container of every PostgreSQL Pod of a Database, before the server, on the
# same image and data volume. It decides the Pod's part from the primary the controller names
# in /etc/database/primary:
#   - the primary with an empty data directory: nothing; the image's entrypoint initialises it
#     (the controller then creates the replication role);
#   - any other Pod with an empty data directory: a copy of the primary's, taken with
#     pg_basebackup through its replication slot, set up as a hot standby that follows it;
#   - any other Pod with data: a hot standby that follows the primary, with the connection
#     settings written again (the replication password may have changed). When the primary
#     answers, pg_rewind first rewinds the data directory to the primary's timeline where it
#     went past the point the primary's timeline forked from it (a primary replaced while it
#     still wrote, a standby that received WAL the new primary never had); it does nothing
#     where it did not ("no rewind required": a primary the controller switched away from,
#     shut down cleanly, whose WAL the new primary received). When pg_rewind fails, the
#     primary is cloned again.
# Standbys reach the primary through the client Service, which routes to the Pod the
# controller labels primary, so they follow a switchover without being set up again.
# Environment: PGDATA, PGPORT, PRIMARY_HOST (the client Service's fully qualified DNS name),
# PODS_DOMAIN (the headless Service's "<name>-headless.<namespace>.svc.<cluster domain>": a Pod's
# own name is "<pod>.${PODS_DOMAIN}"),
# PRIMARY_CONNECT_TIMEOUT (seconds), REPLICATION_USER,
# REPLICATION_PASSWORD_FILE (the credentials Secret's key, mounted), REPLICATION_PASSFILE (the
# password file to write, on the data volume), SERVER_SETTINGS (the settings the server runs
# with on its command line, name=value separated by spaces), HOSTNAME (the Pod's name).
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

# clone replaces the data directory with a copy of the primary's, taken through the Pod's
# slot; it retries until the primary can be copied. Cloned into a sibling directory and
# renamed, so a clone cut short is never taken for data.
clone() {
	local copy=${PGDATA}.clone
	rm -rf "${copy}"
	echo "postgresql-setup: cloning ${primary} through ${PRIMARY_HOST} (slot ${slot})"
	until PGPASSWORD=${replication_password} pg_basebackup --pgdata="${copy}" --host="${PRIMARY_HOST}" \
		--port="${PGPORT}" --username="${REPLICATION_USER}" --no-password --wal-method=stream \
		--slot="${slot}" --checkpoint=fast; do
		rm -rf "${copy}"
		echo "postgresql-setup: the primary cannot be cloned yet; retrying in 5s"
		sleep 5
	done
	rm -rf "${PGDATA}"
	mv "${copy}" "${PGDATA}"
}

# rewind_source is pg_rewind's source server: the Pod the ConfigMap names, by its own name
# under the headless Service (the client Service routes to no Pod while a switchover's target
# is not promoted yet), an ordinary session of the replication role, which pg_hba.conf admits
# to the database postgres only and the controller grants pg_rewind's functions
# (https://www.postgresql.org/docs/current/app-pgrewind.html), its password in the password
# file.
rewind_source="host=${primary}.${PODS_DOMAIN} port=${PGPORT} user=${REPLICATION_USER} passfile=${REPLICATION_PASSFILE} dbname=postgres connect_timeout=${PRIMARY_CONNECT_TIMEOUT}"

# rewind_config writes, beside PGDATA on the data volume, the configuration file pg_rewind's
# crash recovery of a server not shut down cleanly (postgres --single, --config-file) runs
# with, and prints its path: the data directory's postgresql.conf and SERVER_SETTINGS, which
# the server otherwise has only on its command line. Without them the recovery's checkpoints
# would record wal_log_hints off in the control file, which pg_rewind then refuses, and
# remove the WAL wal_keep_size keeps, which pg_rewind reads back to the fork.
rewind_config() {
	local file setting
	file=$(dirname "${PGDATA}")/pg_rewind.conf
	{
		echo "include_if_exists '${PGDATA}/postgresql.conf'"
		for setting in ${SERVER_SETTINGS}; do
			echo "${setting%%=*} = '${setting#*=}'"
		done
	} >"${file}"
	echo "${file}"
}

# primary_role prints what the named primary answers through rewind_source: f when it takes
# writes, t when it is in recovery, c when it takes writes but its last checkpoint is on an
# older timeline than the one it writes, nothing when it does not answer (down, or refusing
# this Pod while its new address has no DNS name yet: pg_hba.conf admits the role by name).
# A promotion does not wait for its checkpoint, and pg_rewind takes the source's timeline
# from its control file: from a primary just promoted it would rewind to the old timeline,
# and the server would then refuse to start ("requested timeline ... does not contain
# minimum recovery point"). The controller checkpoints a primary whose last checkpoint is
# on an older timeline. A WAL file's name begins with its timeline, 8 hexadecimal digits.
primary_role() {
	psql "${rewind_source}" --no-psqlrc --tuples-only --no-align --command="SELECT CASE WHEN pg_is_in_recovery() THEN 't' WHEN (SELECT timeline_id FROM pg_control_checkpoint()) <> ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int THEN 'c' ELSE 'f' END" || true
}

# cluster_state is the data directory's state as its control file says
# (pg_controldata: "shut down", "shut down in recovery", "in production", "in archive
# recovery"...).
cluster_state() {
	LC_ALL=C pg_controldata --pgdata="${PGDATA}" | sed -n 's/^Database cluster state:[[:space:]]*//p'
}

if [[ -s ${PGDATA}/PG_VERSION ]]; then
	if [[ ${me} == "${primary}" ]]; then
		exit 0
	fi
	write_passfile
	state=$(cluster_state) || state=unknown
	# A former primary (a failover or a switchover replaced it), or a standby shut down
	# cleanly, may hold WAL the primary does not (a timeline that forked before its end): it
	# is rewound to the primary's timeline with pg_rewind (nothing to do when it did not
	# fork; for a server not shut down cleanly pg_rewind runs its crash recovery first). The
	# named primary is asked every 5s, for up to two minutes, until it answers: taking
	# writes, it is the source; in recovery, it is a switchover's target, promoted only once
	# this Pod follows it, whose former primary shut down cleanly after its standbys had all
	# its WAL: nothing to rewind. A standby not shut down cleanly is not rewound (pg_rewind's
	# crash recovery runs no standby).
	attempts=0
	if [[ ! -e ${PGDATA}/standby.signal ]]; then
		echo "postgresql-setup: ${primary} is the primary: ${me}, a primary before (${state}), follows it as a standby"
		attempts=24
	elif [[ ${state} == "shut down in recovery" ]]; then
		attempts=24
	fi
	for ((i = 1; i <= attempts; i++)); do
		role=$(primary_role)
		if [[ ${role} == f ]]; then
			# A server stopped uncleanly leaves postmaster.pid naming its process ID, which
			# in this container may be a live process (PID 1 is this script): the crash
			# recovery pg_rewind runs first (postgres --single) would refuse to start. No
			# server runs on this data directory while the Pod's init container does.
			rm -f "${PGDATA}/postmaster.pid"
			if ! pg_rewind --target-pgdata="${PGDATA}" --source-server="${rewind_source}" --config-file="$(rewind_config)"; then
				echo "postgresql-setup: pg_rewind could not rewind ${me} to ${primary}'s timeline: cloning ${primary} again" >&2
				clone
			fi
			break
		fi
		if [[ ${role} == t ]]; then
			echo "postgresql-setup: ${primary} is not promoted yet: ${me} follows it, nothing to rewind"
			break
		fi
		if [[ ${role} == c ]]; then
			if ((i == attempts)); then
				echo "postgresql-setup: ${primary} has not checkpointed on its timeline: cloning ${primary} again" >&2
				clone
				break
			fi
			echo "postgresql-setup: ${primary} has not checkpointed on its timeline yet; retrying in 5s"
			sleep 5
			continue
		fi
		if ((i == attempts)); then
			echo "postgresql-setup: ${primary} does not answer at ${primary}.${PODS_DOMAIN}: ${me} follows it without pg_rewind"
		else
			echo "postgresql-setup: ${primary} does not answer at ${primary}.${PODS_DOMAIN} yet; retrying in 5s"
			sleep 5
		fi
	done
	# Written again at every start: the replication password may have changed.
	follow
	exit 0
fi
if [[ ${me} == "${primary}" ]]; then
	exit 0
fi

clone
follow
echo "postgresql-setup: ${me} is a standby of ${primary}"
