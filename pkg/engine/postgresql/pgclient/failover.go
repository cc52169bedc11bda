package pgclient

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// StopFollowingTimeout bounds how long StopFollowing waits for the standby's WAL receiver to
// exit once told to.
const StopFollowingTimeout = 10 * time.Second

// stopFollowingPoll is how often StopFollowing looks whether the WAL receiver has exited.
const stopFollowingPoll = 100 * time.Millisecond

// StopFollowing makes the standby s stop streaming from its primary: it sets
// primary_conninfo to the empty string (ALTER SYSTEM, in postgresql.auto.conf, so a restart of the server
// keeps it) and reloads the configuration, which shuts the WAL receiver down and starts none
// while primary_conninfo is empty
// (https://www.postgresql.org/docs/current/runtime-config-replication.html#GUC-PRIMARY-CONNINFO),
// then waits up to StopFollowingTimeout for pg_stat_wal_receiver to show no WAL receiver:
// once it returns, s acknowledges no more WAL to any primary. It writes nothing on a primary
// or on a standby whose primary_conninfo is empty already; the standby keeps replaying the
// WAL it has received. ALTER SYSTEM runs on a hot standby (it writes no WAL).
func (Client) StopFollowing(ctx context.Context, s Server) error {
	conn, err := connect(ctx, s)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var inRecovery bool
	var conninfo string
	if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('primary_conninfo')`).Scan(&inRecovery, &conninfo); err != nil {
		return fmt.Errorf("query the primary_conninfo of %s: %w", s.Host, err)
	}
	if !inRecovery {
		return nil
	}
	if conninfo != "" {
		if err := setAndReload(ctx, conn, "primary_conninfo", ""); err != nil {
			return fmt.Errorf("stop %s following its primary: %w", s.Host, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, StopFollowingTimeout)
	defer cancel()
	for {
		var receivers int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_wal_receiver`).Scan(&receivers); err != nil {
			return fmt.Errorf("stop %s following its primary: wait for its WAL receiver to exit: %w", s.Host, err)
		}
		if receivers == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stop %s following its primary: its WAL receiver still runs: %w", s.Host, ctx.Err())
		case <-time.After(stopFollowingPoll):
		}
	}
}

// Follow makes the standby s stream from the primary conninfo names: it sets
// primary_conninfo to conninfo (ALTER SYSTEM) and reloads the configuration, which starts
// the WAL receiver. The postmaster logs the new value: conninfo holds no password (the
// password file it names does).
func (Client) Follow(ctx context.Context, s Server, conninfo string) error {
	conn, err := connect(ctx, s)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := setAndReload(ctx, conn, "primary_conninfo", conninfo); err != nil {
		return fmt.Errorf("make %s follow its primary: %w", s.Host, err)
	}
	return nil
}

// SetSynchronousStandbyNames makes the primary s's synchronous_standby_names value, when it is
// not already (current_setting): ALTER SYSTEM, then a reload, which the WAL senders and the
// committing sessions apply from then on
// (https://www.postgresql.org/docs/current/runtime-config-replication.html#GUC-SYNCHRONOUS-STANDBY-NAMES).
// synchronous_commit is left at its default, on: a commit waits for the standbys' flush.
func (Client) SetSynchronousStandbyNames(ctx context.Context, s Server, value string) error {
	conn, err := connect(ctx, s)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var current string
	if err := conn.QueryRow(ctx, `SELECT current_setting('synchronous_standby_names')`).Scan(&current); err != nil {
		return fmt.Errorf("query the synchronous_standby_names of %s: %w", s.Host, err)
	}
	if current == value {
		return nil
	}
	if err := setAndReload(ctx, conn, "synchronous_standby_names", value); err != nil {
		return fmt.Errorf("set the synchronous_standby_names of %s: %w", s.Host, err)
	}
	return nil
}

// setAndReload writes name = value to the server's postgresql.auto.conf (ALTER SYSTEM, which
// takes no bind parameters: value is quoted as a string literal, name is ours) and makes the
// server read its configuration again (pg_reload_conf()).
func setAndReload(ctx context.Context, conn *pgx.Conn, name, value string) error {
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET "+name+" = "+quoteLiteral(value)); err != nil {
		return err
	}
	var reloaded bool
	if err := conn.QueryRow(ctx, `SELECT pg_reload_conf()`).Scan(&reloaded); err != nil {
		return err
	}
	if !reloaded {
		return fmt.Errorf("pg_reload_conf() could not signal the postmaster")
	}
	return nil
}
