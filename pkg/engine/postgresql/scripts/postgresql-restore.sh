#!/bin/bash
# Runs in the init container "restore" of every PostgreSQL Pod of a Database created with
# spec.restore, before the setup script, on the same image and data volume. On the primary
# the controller names in /etc/database/primary, with an empty data directory, it restores
# the source Database's stanza from the store with pgBackRest into a sibling directory,
# recovers it to completion with a server of its own (a private socket, no TCP, no
# archiving) until it takes writes, gives it this Database's superuser password and database
# name, and moves it into place; the server then starts on it as on any primary's data, and
# the other Pods clone it. Anywhere else, and once the Database was restored, it does
# nothing. A restore that fails leaves the data directory empty and the container failed, its
# last lines saying why (the Pod's terminationMessagePolicy), so the server never starts on
# half-restored data.
# Environment: PGDATA, POSTGRES_USER and POSTGRES_PASSWORD_FILE (this Database's superuser),
# POSTGRES_DB (this Database's database), PGBACKREST_* (the store: repository, keys, CA),
# RESTORE_STANZA (the source Database's name), RESTORE_DATABASE (the source's database),
# RESTORE_TARGET_TIME (empty: the end of the archive; else "YYYY-MM-DD HH:MM:SS[.ffffff]+00"),
# HOSTNAME (the Pod's name).
set -o errexit -o nounset -o pipefail

primary=$(</etc/database/primary)
# Once restored (the controller adds /etc/database/restored), an empty data volume is not
# filled from the source again: the source's old backups are not this Database's data.
if [[ -s ${PGDATA}/PG_VERSION || ${HOSTNAME} != "${primary}" || -e /etc/database/restored ]]; then
	exit 0
fi

restore=${PGDATA}.restore
socket=$(mktemp -d)
rm -rf "${restore}"
mkdir -m 0700 "${restore}"

# pgBackRest restores the latest backup that ended before the target time (the latest of
# all without one) and writes the recovery settings (restore_command, the target) into
# postgresql.auto.conf and recovery.signal
# (https://pgbackrest.org/command.html#command-restore). It finds the backups in the stanza's
# index, backup.info, which keeps naming a backup removed from the store (kubectl delete
# databasebackup) until the stanza's next backup; so the backup is chosen here, among the
# full backups the index names (info's "full backup: <label>" lines) whose manifest the
# store holds (repo-ls, repo-get: paths relative to the repository,
# https://pgbackrest.org/command.html#command-repo-ls), by the end the manifest records
# (backup-timestamp-stop, Unix seconds), and named to pgBackRest (--set). With none found,
# pgBackRest chooses, and says why it cannot.
options=()
target_epoch=
if [[ -n ${RESTORE_TARGET_TIME} ]]; then
	options=(--type=time "--target=${RESTORE_TARGET_TIME}" --target-action=promote)
	target_epoch=$(date -u -d "${RESTORE_TARGET_TIME}" +%s)
	echo "postgresql-restore: restoring ${RESTORE_STANZA} as of ${RESTORE_TARGET_TIME}"
else
	echo "postgresql-restore: restoring ${RESTORE_STANZA} to the end of its archive"
fi
chosen= chosen_stop=0
indexed=$(pgbackrest --stanza="${RESTORE_STANZA}" info 2>/dev/null | sed -n 's/^ *full backup: //p') || indexed=
for label in $(pgbackrest repo-ls --filter='^[0-9]{8}-[0-9]{6}F$' "backup/${RESTORE_STANZA}"); do
	if ! grep -qxF -e "${label}" <<<"${indexed}"; then
		continue
	fi
	stop=$(pgbackrest repo-get "backup/${RESTORE_STANZA}/${label}/backup.manifest" 2>/dev/null |
		awk -F= '$1 == "backup-timestamp-stop" { print $2 }') || stop=
	if [[ ! ${stop} =~ ^[0-9]+$ ]] || ((stop <= chosen_stop)); then
		continue
	fi
	if [[ -z ${target_epoch} ]] || ((stop < target_epoch)); then
		chosen=${label} chosen_stop=${stop}
	fi
done
if [[ -n ${chosen} ]]; then
	echo "postgresql-restore: from backup ${chosen}"
	options+=("--set=${chosen}")
fi
pgbackrest --stanza="${RESTORE_STANZA}" --pg1-path="${restore}" restore "${options[@]}"

server() {
	pg_ctl --pgdata="${restore}" --log="${socket}/server.log" "$@"
}
sql() {
	psql --host="${socket}" --username="${POSTGRES_USER}" --dbname=postgres --no-psqlrc --quiet \
		--tuples-only --no-align -v ON_ERROR_STOP=1 "$@"
}
failed() {
	echo "postgresql-restore: $1; the server said:" >&2
	tail -n 20 "${socket}/server.log" >&2 || true
	exit 1
}

# Recovery replays the archive up to the target and promotes (a restore to the archive's end
# promotes at its end). The server takes connections once its data is consistent, which may
# take long for a large backup; hot_standby then lets the loop ask while it replays. The log
# says every 30 s how far it replayed; a server that runs but does not answer for 2 minutes,
# or whose replay does not move for 30 minutes, fails the restore.
server --options="-c listen_addresses='' -c unix_socket_directories=${socket} -c archive_mode=off -c hba_file=/etc/database/pg_hba.conf" \
	--wait --timeout=86400 start >/dev/null || failed "the restored data does not start"
unanswered=0 stalled=0 replayed=
for ((i = 1; ; i++)); do
	if answer=$(sql --command='SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()' 2>/dev/null); then
		unanswered=0
		[[ ${answer%%|*} == f ]] && break
		lsn=${answer#*|}
		if [[ ${lsn} == "${replayed}" ]]; then
			stalled=$((stalled + 1))
		else
			stalled=0 replayed=${lsn}
		fi
		((stalled < 1800)) || failed "recovery has not replayed past ${replayed} for 30 minutes"
		((i % 30)) || echo "postgresql-restore: recovering: replayed up to ${replayed}"
	else
		server status >/dev/null || failed "recovery stopped before it took writes"
		unanswered=$((unanswered + 1))
		((unanswered < 120)) || failed "the restored server runs but has not answered for 2 minutes"
	fi
	sleep 1
done

# This Database's own credentials and name, not the source's: the superuser's password (the
# controller logs in with it and gives the application and replication roles theirs), the
# database renamed, and the recovery settings removed (the server and its clones replay no
# archive of the source).
sql <<'SQL'
\set password `cat "$POSTGRES_PASSWORD_FILE"`
\set user `printf '%s' "$POSTGRES_USER"`
\set source `printf '%s' "$RESTORE_DATABASE"`
\set target `printf '%s' "$POSTGRES_DB"`
ALTER ROLE :"user" PASSWORD :'password';
ALTER SYSTEM RESET restore_command;
ALTER SYSTEM RESET recovery_target_time;
ALTER SYSTEM RESET recovery_target_action;
SELECT :'source' <> :'target' AS rename \gset
\if :rename
ALTER DATABASE :"source" RENAME TO :"target";
\endif
SQL
server --mode=fast --wait stop >/dev/null

rm -rf "${PGDATA}"
mv "${restore}" "${PGDATA}"
echo "postgresql-restore: restored ${RESTORE_STANZA} into ${PGDATA}"
