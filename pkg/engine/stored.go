package engine

import (
	"context"
	"errors"
	"time"
)

// ObjectStore is what an engine's Backups reads and deletes of an S3-compatible store, by
// object key (a path in the bucket, no leading "/").
type ObjectStore interface {
	// List returns what the store holds directly under prefix, a key ending in "/" (or ""
	// for the bucket's top): the keys of the objects there, and for each deeper level the
	// prefix of its keys up to the next "/" (ending in "/"), in key order.
	List(ctx context.Context, prefix string) ([]string, error)
	// Get returns the content of the object key; ErrObjectNotFound when there is none.
	Get(ctx context.Context, key string) ([]byte, error)
	// DeleteAll deletes every object whose key starts with prefix.
	DeleteAll(ctx context.Context, prefix string) error
}

// ErrObjectNotFound is ObjectStore.Get's error for a key the store does not hold.
var ErrObjectNotFound = errors.New("no such object")

// ErrBackupNotFound is Backups.DeleteStoredBackup's error for a backup the store does not
// hold.
var ErrBackupNotFound = errors.New("no such backup")

// StoredBackup is one backup as the store holds it.
type StoredBackup struct {
	// Database is the name of the Database it was taken of; ID its engine's name for it,
	// unique among that Database's backups (pgBackRest's label, e.g. "20261205-030041F").
	Database, ID string
	// Method is how it was taken, e.g. "pgBackRest full".
	Method string
	// Start and End bound the backup; the data is as of End.
	Start, End time.Time
	// DataBytes is the size of the data it restores, StoredBytes what it takes in the store.
	DataBytes, StoredBytes int64
	// LogStart and LogEnd are the first and last archived log files it needs (PostgreSQL:
	// WAL segment names); empty when the engine names none.
	LogStart, LogEnd string
}
