#!/bin/bash
# Entrypoint of the local cluster's PostgreSQL image (Debian's postgresql-15). It follows the
# environment contract documented for the official postgres image, so a Pod spec written for
# that image runs unchanged:
#   POSTGRES_PASSWORD   superuser password; required to initialise, unless
#                       POSTGRES_HOST_AUTH_METHOD=trust
#   POSTGRES_USER       superuser name (default postgres)
#   POSTGRES_DB         database created at initialisation (default: POSTGRES_USER)
#   POSTGRES_INITDB_ARGS, POSTGRES_INITDB_WALDIR, POSTGRES_HOST_AUTH_METHOD
#                       extra initdb arguments, a separate WAL directory, and the pg_hba.conf
#                       method for remote hosts (default scram-sha-256)
#   PGDATA              the data directory (default /var/lib/postgresql/data)
#   <VAR>_FILE          for POSTGRES_PASSWORD, POSTGRES_USER, POSTGRES_DB and
#                       POSTGRES_INITDB_ARGS: read the value from that file (a mounted Secret)
#   /docker-entrypoint-initdb.d/
#                       run once, in name order, on an empty data directory: *.sh (executed if
#                       executable, else sourced), *.sql, *.sql.gz, *.sql.xz, *.sql.zst
# The default command is `postgres`; arguments starting with "-" are postgres flags. Started as
# root, it makes the data directory the server user's (uid/gid 999) and drops to that user; any
# other command runs as given.
set -o errexit -o nounset -o pipefail

server_uid=999
server_gid=999

die() {
	echo "docker-entrypoint: error: $*" >&2
	exit 1
}

# from_file VAR [default]: sets VAR from VAR_FILE when that is set (both set is an error),
# else keeps VAR, else the default, and exports it.
from_file() {
	local var=$1 def=${2:-} file_var="${1}_FILE"
	local val=${!var:-} file=${!file_var:-}
	if [[ -n ${val} && -n ${file} ]]; then
		die "both ${var} and ${file_var} are set; set only one"
	fi
	if [[ -n ${file} ]]; then
		val=$(<"${file}")
	fi
	export "${var}=${val:-${def}}"
	unset "${file_var}"
}

if [[ $# -eq 0 || ${1:0:1} == - ]]; then
	set -- postgres "$@"
fi

# Not the server: run it as given (e.g. psql, bash).
if [[ $1 != postgres ]]; then
	exec "$@"
fi

export PGDATA=${PGDATA:-/var/lib/postgresql/data}

if [[ $(id -u) == 0 ]]; then
	# The volume may be a fresh root-owned directory: hand it to the server user, then come
	# back as that user.
	mkdir -p "${PGDATA}" /var/run/postgresql
	chown "${server_uid}:${server_gid}" "${PGDATA}" /var/run/postgresql
	chmod 0700 "${PGDATA}"
	find "${PGDATA}" \! -user "${server_uid}" -exec chown "${server_uid}:${server_gid}" {} +
	if [[ -n ${POSTGRES_INITDB_WALDIR:-} ]]; then
		mkdir -p "${POSTGRES_INITDB_WALDIR}"
		chown "${server_uid}:${server_gid}" "${POSTGRES_INITDB_WALDIR}"
		chmod 0700 "${POSTGRES_INITDB_WALDIR}"
	fi
	exec setpriv --reuid="${server_uid}" --regid="${server_gid}" --init-groups "$0" "$@"
fi

# As the server user: PGDATA must be ours and private (initdb and postgres refuse otherwise).
mkdir -p "${PGDATA}"
chmod 0700 "${PGDATA}" 2>/dev/null || true

from_file POSTGRES_USER postgres
from_file POSTGRES_PASSWORD
from_file POSTGRES_DB "${POSTGRES_USER}"
from_file POSTGRES_INITDB_ARGS
auth_method=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}

# psql_run runs psql as the superuser over the temporary server's Unix socket.
psql_run() {
	psql -v ON_ERROR_STOP=1 --no-psqlrc --username "${POSTGRES_USER}" --no-password --dbname "${1}" "${@:2}"
}

# run_initdb_scripts runs /docker-entrypoint-initdb.d against POSTGRES_DB.
run_initdb_scripts() {
	local f
	for f in /docker-entrypoint-initdb.d/*; do
		[[ -e ${f} ]] || continue
		echo "docker-entrypoint: running ${f}"
		case ${f} in
		*.sh)
			if [[ -x ${f} ]]; then
				"${f}"
			else
				# shellcheck disable=SC1090
				. "${f}"
			fi
			;;
		*.sql) psql_run "${POSTGRES_DB}" -f "${f}" ;;
		*.sql.gz) gzip -dc "${f}" | psql_run "${POSTGRES_DB}" ;;
		*.sql.xz) xz -dc "${f}" | psql_run "${POSTGRES_DB}" ;;
		*.sql.zst) zstd -dc "${f}" | psql_run "${POSTGRES_DB}" ;;
		*) echo "docker-entrypoint: ignoring ${f}" ;;
		esac
	done
}

if [[ ! -s ${PGDATA}/PG_VERSION ]]; then
	if [[ -z ${POSTGRES_PASSWORD} && ${auth_method} != trust ]]; then
		die "the database is uninitialised and POSTGRES_PASSWORD is not set: set it (or POSTGRES_PASSWORD_FILE), or POSTGRES_HOST_AUTH_METHOD=trust to allow connections without a password"
	fi
	echo "docker-entrypoint: initialising ${PGDATA} for superuser ${POSTGRES_USER}"
	initdb_args=(--username="${POSTGRES_USER}" --pgdata="${PGDATA}")
	pwfile=
	if [[ -n ${POSTGRES_PASSWORD} ]]; then
		# A private file rather than a /dev/fd pipe, which not every container has.
		pwfile=$(mktemp)
		printf '%s\n' "${POSTGRES_PASSWORD}" >"${pwfile}"
		initdb_args+=(--pwfile="${pwfile}")
	fi
	if [[ -n ${POSTGRES_INITDB_WALDIR:-} ]]; then
		initdb_args+=(--waldir="${POSTGRES_INITDB_WALDIR}")
	fi
	# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of flags, split on spaces.
	initdb "${initdb_args[@]}" ${POSTGRES_INITDB_ARGS}
	[[ -z ${pwfile} ]] || rm -f "${pwfile}"

	# Remote clients authenticate with auth_method; local socket connections are trusted,
	# as in the official image.
	echo "host all all all ${auth_method}" >>"${PGDATA}/pg_hba.conf"
	echo "listen_addresses = '*'" >>"${PGDATA}/postgresql.conf"

	# A temporary server on the Unix socket only, for POSTGRES_DB and the init scripts.
	pg_ctl -D "${PGDATA}" -w -o "-c listen_addresses=''" start
	export PGPASSWORD=${POSTGRES_PASSWORD}
	if [[ ${POSTGRES_DB} != postgres ]]; then
		exists=$(psql_run postgres --tuples-only --no-align \
			--set db="${POSTGRES_DB}" <<<"SELECT 1 FROM pg_database WHERE datname = :'db';")
		if [[ -z ${exists} ]]; then
			psql_run postgres --set db="${POSTGRES_DB}" <<<'CREATE DATABASE :"db";'
		fi
	fi
	run_initdb_scripts
	unset PGPASSWORD
	pg_ctl -D "${PGDATA}" -m fast -w stop
	echo "docker-entrypoint: initialisation done"
fi

exec "$@"
