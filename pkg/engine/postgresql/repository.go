package postgresql

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"example.com/database-apiserver/pkg/engine"
)

// A pgBackRest repository (https://pgbackrest.org/user-guide.html#concept) holds each
// stanza's backups under backup/<stanza>/: the index backup.info (and its copy,
// backup.info.copy, which pgBackRest reads when the first is missing or damaged), and a
// directory per backup named by its label, holding backup.manifest (and
// backup.manifest.copy), which a restore reads first, and the files under pg_data/. The
// index is an INI file whose values are JSON; its section [backup:current] has a key per
// backup, its label, whose value holds the backup's times (Unix seconds), sizes (bytes) and
// the first and last WAL segments it needs. pgBackRest's backup and expire commands drop
// from the index a backup whose directory is gone, with a warning.

const (
	backupInfoFile     = "backup.info"
	backupManifestFile = "backup.manifest"
)

// backupLabel is the label of a full backup, "YYYYMMDD-HHMMSSF": this project takes only
// full backups.
var backupLabel = regexp.MustCompile(`^[0-9]{8}-[0-9]{6}F$`)

// backupInfoEntry is a backup's value in backup.info's [backup:current] section.
type backupInfoEntry struct {
	Type         string `json:"backup-type"`
	Start        int64  `json:"backup-timestamp-start"`
	Stop         int64  `json:"backup-timestamp-stop"`
	Size         int64  `json:"backup-info-size"`
	RepoSize     int64  `json:"backup-info-repo-size"`
	ArchiveStart string `json:"backup-archive-start"`
	ArchiveStop  string `json:"backup-archive-stop"`
}

// parseBackupInfo returns the backups of a backup.info's [backup:current] section by label.
// It fails on a line that is neither a section, a key=value, blank nor a comment, and on a
// backup whose value is not the JSON object pgBackRest writes.
func parseBackupInfo(data []byte) (map[string]backupInfoEntry, error) {
	backups := map[string]backupInfoEntry{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok {
				return nil, fmt.Errorf("line %d is not key=value", n)
			}
			if section != "backup:current" {
				continue
			}
			var e backupInfoEntry
			if err := json.Unmarshal([]byte(value), &e); err != nil {
				return nil, fmt.Errorf("line %d, backup %s: %w", n, key, err)
			}
			backups[key] = e
		}
	}
	return backups, sc.Err()
}

// stanzaPrefix is the key prefix of a stanza's backups in the repository at repo; of every
// stanza's for "".
func stanzaPrefix(repo, stanza string) string {
	return strings.TrimPrefix(path.Join(repo, "backup", stanza), "/") + "/"
}

// StoredBackups lists the full backups of the stanza database of the repository at repo
// (every stanza for ""), whose index names them and whose directory holds a manifest (or
// its copy) and data: what pgBackRest's restore reads. Stanzas are read side by side, at
// most stanzaReaders at a time; one whose index cannot be read is left out, named in the
// error.
func (Engine) StoredBackups(ctx context.Context, store engine.ObjectStore, repo, database string) ([]engine.StoredBackup, error) {
	var stanzas []string
	if database != "" {
		stanzas = []string{database}
	} else {
		dirs, err := store.List(ctx, stanzaPrefix(repo, ""))
		if err != nil {
			return nil, err
		}
		for _, dir := range dirs {
			if strings.HasSuffix(dir, "/") {
				stanzas = append(stanzas, path.Base(dir))
			}
		}
	}
	found := make([][]engine.StoredBackup, len(stanzas))
	errs := make([]error, len(stanzas))
	readers := make(chan struct{}, stanzaReaders)
	var wg sync.WaitGroup
	for i, stanza := range stanzas {
		wg.Go(func() {
			readers <- struct{}{}
			defer func() { <-readers }()
			if found[i], errs[i] = stanzaBackups(ctx, store, repo, stanza); errs[i] != nil {
				errs[i] = fmt.Errorf("stanza %s: %w", stanza, errs[i])
			}
		})
	}
	wg.Wait()
	return slices.Concat(found...), errors.Join(errs...)
}

// stanzaReaders is how many stanzas StoredBackups reads at a time.
const stanzaReaders = 8

// maxTimestamp is the last second RFC 3339 writes (9999-12-31T23:59:59Z): a backup whose
// times fall outside 0 to it is not one pgBackRest wrote.
const maxTimestamp = 253402300799

// stanzaBackups lists one stanza's restorable full backups, oldest first; none for a
// stanza without an index yet (stanza-create not done).
func stanzaBackups(ctx context.Context, store engine.ObjectStore, repo, stanza string) ([]engine.StoredBackup, error) {
	prefix := stanzaPrefix(repo, stanza)
	index, err := readBackupInfo(ctx, store, prefix)
	if errors.Is(err, engine.ErrObjectNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	entries, err := store.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var backups []engine.StoredBackup
	for _, dir := range entries {
		label := strings.TrimSuffix(strings.TrimPrefix(dir, prefix), "/")
		e, ok := index[label]
		if !strings.HasSuffix(dir, "/") || !ok || e.Type != "full" || !backupLabel.MatchString(label) ||
			e.Start < 0 || e.Stop < e.Start || e.Stop > maxTimestamp {
			continue
		}
		whole, err := restorable(ctx, store, dir)
		if err != nil {
			return nil, err
		}
		if !whole {
			continue
		}
		backups = append(backups, engine.StoredBackup{
			Database: stanza, ID: label, Method: "pgBackRest full",
			Start: time.Unix(e.Start, 0).UTC(), End: time.Unix(e.Stop, 0).UTC(),
			DataBytes: e.Size, StoredBytes: e.RepoSize,
			LogStart: e.ArchiveStart, LogEnd: e.ArchiveStop,
		})
	}
	slices.SortFunc(backups, func(a, b engine.StoredBackup) int { return a.End.Compare(b.End) })
	return backups, nil
}

// readBackupInfo reads a stanza's index, or its copy when the index is missing or cannot be
// parsed. It is engine.ErrObjectNotFound when neither exists, and otherwise the first error
// that is not.
func readBackupInfo(ctx context.Context, store engine.ObjectStore, prefix string) (map[string]backupInfoEntry, error) {
	var failed error
	for _, name := range []string{backupInfoFile, backupInfoFile + ".copy"} {
		data, err := store.Get(ctx, prefix+name)
		if err == nil {
			var index map[string]backupInfoEntry
			if index, err = parseBackupInfo(data); err == nil {
				return index, nil
			}
			err = fmt.Errorf("%s: %w", name, err)
		}
		if failed == nil || errors.Is(failed, engine.ErrObjectNotFound) {
			failed = err
		}
	}
	return nil, failed
}

// restorable reports whether a backup's directory holds a manifest (or its copy) and data.
func restorable(ctx context.Context, store engine.ObjectStore, dir string) (bool, error) {
	files, err := store.List(ctx, dir)
	if err != nil {
		return false, err
	}
	manifest := slices.Contains(files, dir+backupManifestFile) || slices.Contains(files, dir+backupManifestFile+".copy")
	return manifest && slices.Contains(files, dir+"pg_data/"), nil
}

// DeleteStoredBackup deletes the directory of the full backup id of stanza database; the
// stanza's index names it until pgBackRest's next backup or expire of that stanza drops it.
func (Engine) DeleteStoredBackup(ctx context.Context, store engine.ObjectStore, repo, database, id string) error {
	if !backupLabel.MatchString(id) {
		return engine.ErrBackupNotFound
	}
	dir := stanzaPrefix(repo, database) + id + "/"
	files, err := store.List(ctx, dir)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return engine.ErrBackupNotFound
	}
	return store.DeleteAll(ctx, dir)
}
