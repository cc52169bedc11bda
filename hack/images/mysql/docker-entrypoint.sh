#!/bin/bash
# Entrypoint of the local cluster's MySQL image (Debian's mysql-server-core). It follows the
# environment contract documented for the official mysql image, so a Pod spec written for
# that image runs unchanged:
#   MYSQL_ROOT_PASSWORD         root's password; to initialise, it (or MYSQL_ALLOW_EMPTY_PASSWORD
#                               or MYSQL_RANDOM_ROOT_PASSWORD) must be set
#   MYSQL_ALLOW_EMPTY_PASSWORD  any non-empty value: root has no password
#   MYSQL_RANDOM_ROOT_PASSWORD  any non-empty value: root gets a random password, written to
#                               <datadir>/generated-root-password (mode 0600, the server
#                               user's), never printed: the container's log is readable by
#                               whoever may read Pod logs
#   MYSQL_ROOT_HOST             the host root may connect from besides localhost (default %)
#   MYSQL_DATABASE              a database created at initialisation
#   MYSQL_USER, MYSQL_PASSWORD  a user created at initialisation, with every privilege on
#                               MYSQL_DATABASE (MYSQL_USER may not be root)
#   <VAR>_FILE                  for each of the above: read the value from that file (a
#                               mounted Secret)
#   /docker-entrypoint-initdb.d/
#                               run once, in name order, on an empty data directory: *.sh
#                               (executed if executable, else sourced), *.sql, *.sql.gz,
#                               *.sql.xz, *.sql.zst, against MYSQL_DATABASE when set
# The data directory is mysqld's datadir (/var/lib/mysql); it is initialised when it holds no
# mysql directory. The default command is `mysqld`; arguments starting with "-" are mysqld
# flags. The server reads /etc/mysql/my.cnf, which includes /etc/mysql/conf.d/*.cnf, and
# listens on every address (bind-address *, mysqld's default). Started as root, it makes the
# data directory the server user's (uid/gid 999) and drops to that user; any other command
# runs as given.
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

# sql_string VALUE prints VALUE as an SQL string literal: quoted, with \ and ' doubled.
sql_string() {
	local v=${1//\\/\\\\}
	printf "'%s'" "${v//\'/\'\'}"
}

# sql_name VALUE prints VALUE as a quoted identifier: in backquotes, with ` doubled.
sql_name() {
	printf '`%s`' "${1//\`/\`\`}"
}

if [[ $# -eq 0 || ${1:0:1} == - ]]; then
	set -- mysqld "$@"
fi

# Not the server, or the server asked for its help or version: run it as given.
if [[ $1 != mysqld && $1 != mysqld-debug ]]; then
	exec "$@"
fi
for arg in "$@"; do
	case ${arg} in
	--help | --verbose | -V | --version | -\?) exec "$@" ;;
	esac
done

# datadir is the server's, as its options (my.cnf and the arguments) set it.
datadir=$("$@" --verbose --help 2>/dev/null | awk '$1 == "datadir" { print $2; exit }')
datadir=${datadir%/}
[[ -n ${datadir} ]] || die "mysqld reports no datadir (mysqld $* --verbose --help)"
socket_dir=/var/run/mysqld

if [[ $(id -u) == 0 ]]; then
	# The volume may be a fresh root-owned directory: hand it to the server user, then come
	# back as that user.
	mkdir -p "${datadir}" "${socket_dir}"
	chown "${server_uid}:${server_gid}" "${datadir}" "${socket_dir}"
	find "${datadir}" \! -user "${server_uid}" -exec chown "${server_uid}:${server_gid}" {} +
	exec setpriv --reuid="${server_uid}" --regid="${server_gid}" --init-groups "$0" "$@"
fi

from_file MYSQL_ROOT_PASSWORD
from_file MYSQL_ALLOW_EMPTY_PASSWORD
from_file MYSQL_RANDOM_ROOT_PASSWORD
from_file MYSQL_ROOT_HOST %
from_file MYSQL_DATABASE
from_file MYSQL_USER
from_file MYSQL_PASSWORD

if [[ -d ${datadir}/mysql ]]; then
	exec "$@"
fi

if [[ -z ${MYSQL_ROOT_PASSWORD} && -z ${MYSQL_ALLOW_EMPTY_PASSWORD} && -z ${MYSQL_RANDOM_ROOT_PASSWORD} ]]; then
	die "the database is uninitialised and no root password is given: set MYSQL_ROOT_PASSWORD (or MYSQL_ROOT_PASSWORD_FILE), MYSQL_ALLOW_EMPTY_PASSWORD or MYSQL_RANDOM_ROOT_PASSWORD"
fi
if [[ ${MYSQL_USER} == root ]]; then
	die "MYSQL_USER may not be root: root is MYSQL_ROOT_PASSWORD's"
fi
if [[ -n ${MYSQL_USER} && -z ${MYSQL_PASSWORD} ]]; then
	die "MYSQL_USER is set without MYSQL_PASSWORD"
fi
if [[ -n ${MYSQL_RANDOM_ROOT_PASSWORD} ]]; then
	MYSQL_ROOT_PASSWORD=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
fi

echo "docker-entrypoint: initialising ${datadir}"
# The volume's mount point may hold lost+found, which mysqld --initialize accepts.
"$@" --initialize-insecure --datadir="${datadir}"

# A temporary server on a private Unix socket, no TCP (the probes, on 127.0.0.1, cannot pass
# before it is done) and no binary log (the accounts made here are this server's own, not
# transactions to replicate).
work=$(mktemp -d)
socket=${work}/mysqld.sock
"$@" --datadir="${datadir}" --skip-networking --skip-log-bin --mysqlx=OFF --socket="${socket}" \
	--pid-file="${work}/mysqld.pid" &
server=$!
# The client's options: the socket, and root's password once it has one (an option file,
# not the command line, where ps shows it).
client_cnf=${work}/client.cnf
printf '[client]\nuser=root\nsocket=%s\n' "${socket}" >"${client_cnf}"
chmod 0600 "${client_cnf}"
for _ in $(seq 120); do
	if mysqladmin --defaults-extra-file="${client_cnf}" ping --silent >/dev/null 2>&1; then
		break
	fi
	kill -0 "${server}" 2>/dev/null || die "the initialisation server exited"
	sleep 1
done
mysqladmin --defaults-extra-file="${client_cnf}" ping --silent >/dev/null || die "the initialisation server did not answer in 120s"

mysql_run() {
	mysql --defaults-extra-file="${client_cnf}" --protocol=socket "$@"
}

{
	root_password=$(sql_string "${MYSQL_ROOT_PASSWORD}")
	echo "ALTER USER 'root'@'localhost' IDENTIFIED BY ${root_password};"
	if [[ ${MYSQL_ROOT_HOST} != localhost ]]; then
		root_host=$(sql_string "${MYSQL_ROOT_HOST}")
		echo "CREATE USER 'root'@${root_host} IDENTIFIED BY ${root_password};"
		echo "GRANT ALL ON *.* TO 'root'@${root_host} WITH GRANT OPTION;"
		echo "GRANT PROXY ON ''@'' TO 'root'@${root_host} WITH GRANT OPTION;"
	fi
	if [[ -n ${MYSQL_DATABASE} ]]; then
		echo "CREATE DATABASE IF NOT EXISTS $(sql_name "${MYSQL_DATABASE}");"
	fi
	if [[ -n ${MYSQL_USER} ]]; then
		user=$(sql_string "${MYSQL_USER}")
		echo "CREATE USER ${user}@'%' IDENTIFIED BY $(sql_string "${MYSQL_PASSWORD}");"
		if [[ -n ${MYSQL_DATABASE} ]]; then
			echo "GRANT ALL ON $(sql_name "${MYSQL_DATABASE}").* TO ${user}@'%';"
		fi
	fi
} | mysql_run
if [[ -n ${MYSQL_ROOT_PASSWORD} ]]; then
	printf 'password=%s\n' "${MYSQL_ROOT_PASSWORD}" >>"${client_cnf}"
fi
if [[ -n ${MYSQL_RANDOM_ROOT_PASSWORD} ]]; then
	(umask 077 && printf '%s\n' "${MYSQL_ROOT_PASSWORD}" >"${datadir}/generated-root-password")
	echo "docker-entrypoint: root's generated password is in ${datadir}/generated-root-password"
fi

db_args=()
if [[ -n ${MYSQL_DATABASE} ]]; then
	db_args=(--database="${MYSQL_DATABASE}")
fi
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
	*.sql) mysql_run "${db_args[@]}" <"${f}" ;;
	*.sql.gz) gzip -dc "${f}" | mysql_run "${db_args[@]}" ;;
	*.sql.xz) xz -dc "${f}" | mysql_run "${db_args[@]}" ;;
	*.sql.zst) zstd -dc "${f}" | mysql_run "${db_args[@]}" ;;
	*) echo "docker-entrypoint: ignoring ${f}" ;;
	esac
done

mysqladmin --defaults-extra-file="${client_cnf}" shutdown
wait "${server}" || die "the initialisation server did not stop cleanly"
rm -rf "${work}"
echo "docker-entrypoint: initialisation done"

exec "$@"
