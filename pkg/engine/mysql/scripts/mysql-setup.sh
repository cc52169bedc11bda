#!/bin/bash
# Runs in the init container of every MySQL Pod of a Database, before the server, on the same
# image and data volume. It writes the server's replication settings into MYSQL_CONFIG_DIR
# (an emptyDir the server container mounts at /etc/mysql/conf.d, which the image's my.cnf
# includes), and decides the Pod's part from the primary the controller names in
# /etc/database/primary:
#   - every Pod: server-id SERVER_ID_BASE + its ordinal (unique in the Database), the binary
#     log, GTIDs (gtid-mode and enforce-gtid-consistency ON), the CLONE plugin, and the
#     client's host name looked up at every connection (skip-name-resolve OFF, no host cache):
#     the replication account's host is a name pattern; the warning of an address without a
#     name (MY-010055: a client Pod that backs no Service, the controller) is not logged;
#     both semi-synchronous replication plugins, the replica side enabled (a replica
#     acknowledges a transaction once in its relay log when its source asks for it), the
#     source side left to the controller, which enables it on the primary for a Database
#     whose durability is Synchronous
#     (https://dev.mysql.com/doc/refman/9.7/en/replication-semisync-installation.html);
#     and skip-replica-start ON: a channel does not start when the server does. It would
#     read from the source it last had, which after a failover is the fenced former
#     primary, and acknowledge its commits; the controller starts the channel once it
#     reads the primary (SyncReplica);
#   - every Pod with data, the primary's too: super-read-only ON, so it takes no writes
#     until the controller promotes it (it points a replica at the primary, and turns
#     super-read-only off on the server it promotes or on the primary it confirmed, when
#     that comes back read-only with no source). A Pod that reads a stale primary name, or
#     a former primary, never starts writable beside the one the controller promoted. The
#     controller also persists super_read_only in each server's data directory, for the
#     starts of a server whose container restarts in place (this script does not run
#     again then);
#   - the primary with an empty data directory: nothing more, so it starts writable; the
#     image's entrypoint initialises it and writes its accounts through a temporary server
#     that reads these settings (the controller then creates the replication user);
#   - any other Pod with an empty data directory: a copy of the primary's data taken with the
#     CLONE plugin, from a scratch server of its own, into a sibling directory that is moved
#     into place once complete (a clone cut short is never taken for data). The copy carries
#     the primary's executed GTIDs, so the replica then reads the primary's binary log from
#     where the copy ends (SOURCE_AUTO_POSITION) however old the primary is.
# The CLONE statements are from https://dev.mysql.com/doc/refman/8.4/en/clone-plugin-remote.html.
# Environment: DATADIR, MYSQL_CONFIG_DIR, MYSQL_PORT, SERVER_ID_BASE, PODS_DOMAIN (the
# headless Service's "<name>-headless.<namespace>.svc.<cluster domain>": a Pod's stable name is
# "<pod>.${PODS_DOMAIN}"), REPLICATION_USER, REPLICATION_PASSWORD_FILE (the credentials
# Secret's key, mounted), HOSTNAME (the Pod's name).
set -o errexit -o nounset -o pipefail

me=${HOSTNAME}
primary=$(</etc/database/primary)
ordinal=${me##*-}

# write_config [writable] writes the server's replication settings, replacing any earlier
# ones; the server starts read-only but with the argument "writable".
write_config() {
	local conf=${MYSQL_CONFIG_DIR}/replication.cnf
	{
		echo '[mysqld]'
		echo "server-id=$((SERVER_ID_BASE + ordinal))"
		echo 'log-bin=binlog'
		echo 'gtid-mode=ON'
		echo 'enforce-gtid-consistency=ON'
		echo 'plugin-load-add=mysql_clone.so'
		echo "report-host=${me}.${PODS_DOMAIN}"
		echo 'skip-name-resolve=OFF'
		echo 'host-cache-size=0'
		echo 'log-error-suppression-list=MY-010055'
		echo 'plugin-load-add=semisync_source.so'
		echo 'plugin-load-add=semisync_replica.so'
		# loose-: the entrypoint's initialisation (mysqld --initialize) loads no plugin, and
		# refuses an unknown option.
		echo 'loose-rpl-semi-sync-replica-enabled=ON'
		echo 'skip-replica-start=ON'
		if [[ ${1:-} != writable ]]; then
			echo 'super-read-only=ON'
		fi
	} >"${conf}.new"
	# The server ignores a world-writable option file.
	chmod 0644 "${conf}.new"
	mv "${conf}.new" "${conf}"
}

if [[ -d ${DATADIR}/mysql ]]; then
	if [[ ${me} != "${primary}" ]]; then
		echo "mysql-setup: ${primary} is the primary: ${me} starts read-only"
	else
		echo "mysql-setup: ${me} is the primary: it starts read-only until the controller promotes it"
	fi
	write_config
	exit 0
fi
if [[ ${me} == "${primary}" ]]; then
	write_config writable
	exit 0
fi

# A data directory without the mysql directory holds at most a clone cut short: it is
# cleared. lost+found belongs to the file system.
find "${DATADIR}" -mindepth 1 -maxdepth 1 ! -name lost+found -exec rm -rf {} +

donor=${primary}.${PODS_DOMAIN}
# The scratch server's data directory may not be hidden: InnoDB fails to start on a data
# directory whose name starts with "." ("Can't create UNDO tablespace ... already exists").
scratch=${DATADIR}/setup-server
clone=${DATADIR}/.clone
socket=/tmp/mysql-setup.sock
password=$(<"${REPLICATION_PASSWORD_FILE}")
# A string literal: \ and ' doubled.
password=${password//\\/\\\\}
password=${password//\'/\'\'}

echo "mysql-setup: cloning ${primary} (${donor}:${MYSQL_PORT})"
mysqld --no-defaults --initialize-insecure --datadir="${scratch}"
mysqld --no-defaults --datadir="${scratch}" --socket="${socket}" --port="${MYSQL_PORT}" --bind-address=127.0.0.1 \
	--mysqlx=OFF --plugin-load-add=mysql_clone.so --pid-file=/tmp/mysql-setup.pid &
server=$!
until mysqladmin --no-defaults --socket="${socket}" --user=root ping --silent; do
	if ! kill -0 "${server}" 2>/dev/null; then
		echo "mysql-setup: the scratch server exited" >&2
		exit 1
	fi
	sleep 1
done
until mysql --no-defaults --socket="${socket}" --user=root <<SQL; do
SET GLOBAL clone_valid_donor_list = '${donor}:${MYSQL_PORT}';
CLONE INSTANCE FROM '${REPLICATION_USER}'@'${donor}':${MYSQL_PORT} IDENTIFIED BY '${password}' DATA DIRECTORY = '${clone}' REQUIRE SSL;
SQL
	rm -rf "${clone}"
	echo "mysql-setup: the primary cannot be cloned yet; retrying in 5s"
	sleep 5
done
mysqladmin --no-defaults --socket="${socket}" --user=root shutdown
wait "${server}" || true
rm -rf "${scratch}"

# The mysql directory last: it is what tells a data directory (here and to the image's
# entrypoint, which then does not initialise one).
mkdir -p "${clone}/mysql"
find "${clone}" -mindepth 1 -maxdepth 1 ! -name mysql -exec mv -t "${DATADIR}" {} +
mv "${clone}/mysql" "${DATADIR}/mysql"
rmdir "${clone}"
write_config
echo "mysql-setup: ${me} is a copy of ${primary}, read-only until the controller points it at ${primary}"
