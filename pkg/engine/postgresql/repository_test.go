package postgresql

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/engine/enginetest"
)

// fakeStore is an in-memory engine.ObjectStore: object key -> content.
type fakeStore = enginetest.ObjectStore

// backupInfo is a backup.info as pgBackRest 2.54 writes it: three full backups
// (2026-12-03, -04, -05 at 03:00 UTC) and a differential one on the last.
const backupInfo = `[backrest]
backrest-checksum="5e2f0b6c1c8b4b1d9b0f3f4d6e3a2c1b0a9f8e7d"
backrest-format=5
backrest-version="2.54.0"

[backup:current]
20261203-030041F={"backrest-format":5,"backrest-version":"2.54.0","backup-archive-start":"000000010000000000000004","backup-archive-stop":"000000010000000000000004","backup-info-repo-size":2420349,"backup-info-repo-size-delta":2420349,"backup-info-size":31204867,"backup-info-size-delta":31204867,"backup-lsn-start":"0/4000028","backup-lsn-stop":"0/4000138","backup-timestamp-start":1796266841,"backup-timestamp-stop":1796266933,"backup-type":"full","db-id":1,"option-archive-check":true,"option-archive-copy":false,"option-backup-standby":false,"option-checksum-page":true,"option-compress":true,"option-hardlink":false,"option-online":true}
20261204-030039F={"backrest-format":5,"backrest-version":"2.54.0","backup-archive-start":"000000010000000000000009","backup-archive-stop":"00000001000000000000000A","backup-info-repo-size":2511020,"backup-info-repo-size-delta":2511020,"backup-info-size":32505856,"backup-info-size-delta":32505856,"backup-lsn-start":"0/9000028","backup-lsn-stop":"0/A000100","backup-timestamp-start":1796353239,"backup-timestamp-stop":1796353340,"backup-type":"full","db-id":1,"option-archive-check":true,"option-archive-copy":false,"option-backup-standby":false,"option-checksum-page":true,"option-compress":true,"option-hardlink":false,"option-online":true}
20261205-030041F={"backrest-format":5,"backrest-version":"2.54.0","backup-archive-start":"000000010000000000000010","backup-archive-stop":"000000010000000000000010","backup-info-repo-size":2602114,"backup-info-repo-size-delta":2602114,"backup-info-size":33554432,"backup-info-size-delta":33554432,"backup-lsn-start":"0/10000028","backup-lsn-stop":"0/10000138","backup-timestamp-start":1796439641,"backup-timestamp-stop":1796439777,"backup-type":"full","db-id":1,"option-archive-check":true,"option-archive-copy":false,"option-backup-standby":false,"option-checksum-page":true,"option-compress":true,"option-hardlink":false,"option-online":true}
20261205-030041F_20261206-030040D={"backrest-format":5,"backrest-version":"2.54.0","backup-archive-start":"000000010000000000000014","backup-archive-stop":"000000010000000000000014","backup-info-repo-size":104233,"backup-info-repo-size-delta":1204,"backup-info-size":33554432,"backup-info-size-delta":16384,"backup-prior":"20261205-030041F","backup-reference":["20261205-030041F"],"backup-timestamp-start":1796526040,"backup-timestamp-stop":1796526052,"backup-type":"diff","db-id":1,"option-archive-check":true,"option-archive-copy":false,"option-backup-standby":false,"option-checksum-page":true,"option-compress":true,"option-hardlink":false,"option-online":true}

[db]
db-catalog-version=202307071
db-control-version=1300
db-id=1
db-system-id=7445123456789012345
db-version="16"

[db:history]
1={"db-catalog-version":202307071,"db-control-version":1300,"db-system-id":7445123456789012345,"db-version":"16"}
`

// The backups of backupInfo, as StoredBackups returns them for stanza "ledger".
var (
	backup1203 = engine.StoredBackup{
		Database: "ledger", ID: "20261203-030041F", Method: "pgBackRest full",
		Start: time.Date(2026, 12, 3, 3, 0, 41, 0, time.UTC), End: time.Date(2026, 12, 3, 3, 2, 13, 0, time.UTC),
		DataBytes: 31204867, StoredBytes: 2420349,
		LogStart: "000000010000000000000004", LogEnd: "000000010000000000000004",
	}
	backup1204 = engine.StoredBackup{
		Database: "ledger", ID: "20261204-030039F", Method: "pgBackRest full",
		Start: time.Date(2026, 12, 4, 3, 0, 39, 0, time.UTC), End: time.Date(2026, 12, 4, 3, 2, 20, 0, time.UTC),
		DataBytes: 32505856, StoredBytes: 2511020,
		LogStart: "000000010000000000000009", LogEnd: "00000001000000000000000A",
	}
	backup1205 = engine.StoredBackup{
		Database: "ledger", ID: "20261205-030041F", Method: "pgBackRest full",
		Start: time.Date(2026, 12, 5, 3, 0, 41, 0, time.UTC), End: time.Date(2026, 12, 5, 3, 2, 57, 0, time.UTC),
		DataBytes: 33554432, StoredBytes: 2602114,
		LogStart: "000000010000000000000010", LogEnd: "000000010000000000000010",
	}
)

const (
	testRepo   = "/databases/production"
	ledgerDir  = "databases/production/backup/ledger/"
	archiveDir = "databases/production/archive/ledger/"
)

// addBackup puts into s the directory of backup label of the stanza at dir as pgBackRest
// writes it: the manifest, its copy and files under pg_data/.
func addBackup(s fakeStore, dir, label string) {
	d := dir + label + "/"
	s[d+"backup.manifest"] = []byte("[backup]\n")
	s[d+"backup.manifest.copy"] = []byte("[backup]\n")
	s[d+"pg_data/PG_VERSION.gz"] = []byte("16")
	s[d+"pg_data/base/1/1259.gz"] = []byte("data")
	s[d+"pg_data/global/pg_control.gz"] = []byte("control")
}

// repository is a store holding the repository testRepo with stanza "ledger" as
// pgBackRest leaves it after backupInfo's backups, and its archive.
func repository() fakeStore {
	s := fakeStore{
		ledgerDir + "backup.info":      []byte(backupInfo),
		ledgerDir + "backup.info.copy": []byte(backupInfo),
		archiveDir + "archive.info":    []byte("[db]\ndb-id=1\n"),
		archiveDir + "16-1/0000000100000000/000000010000000000000004-6b5a1c.gz": []byte("wal"),
	}
	for _, label := range []string{"20261203-030041F", "20261204-030039F", "20261205-030041F", "20261205-030041F_20261206-030040D"} {
		addBackup(s, ledgerDir, label)
	}
	// backup.history holds a copy of each manifest; "latest" is pgBackRest's link.
	s[ledgerDir+"backup.history/2026/20261203-030041F.manifest.gz"] = []byte("m")
	s[ledgerDir+"latest"] = []byte("20261205-030041F_20261206-030040D")
	return s
}

// The fake lists as S3 does with delimiter "/": the objects directly under the prefix and
// one common prefix per deeper level, sorted.
func TestFakeStoreListsOneLevel(t *testing.T) {
	s := repository()
	got, err := s.List(t.Context(), "databases/production/")
	require.NoError(t, err)
	require.Equal(t, []string{"databases/production/archive/", "databases/production/backup/"}, got)
	got, err = s.List(t.Context(), ledgerDir+"20261205-030041F/")
	require.NoError(t, err)
	require.Equal(t, []string{
		ledgerDir + "20261205-030041F/backup.manifest",
		ledgerDir + "20261205-030041F/backup.manifest.copy",
		ledgerDir + "20261205-030041F/pg_data/",
	}, got)
	got, err = s.List(t.Context(), "")
	require.NoError(t, err)
	require.Equal(t, []string{"databases/"}, got)
}

// parseBackupInfo returns [backup:current]'s entries by label, ignores the other sections,
// comments and blank lines, and fails on a line that is not key=value or a value that is
// not JSON.
func TestParseBackupInfo(t *testing.T) {
	t.Run("pgBackRest's file", func(t *testing.T) {
		got, err := parseBackupInfo([]byte(backupInfo))
		require.NoError(t, err)
		require.Equal(t, []string{"20261203-030041F", "20261204-030039F", "20261205-030041F", "20261205-030041F_20261206-030040D"},
			slices.Sorted(maps.Keys(got)))
		require.Equal(t, backupInfoEntry{
			Type: "full", Start: 1796439641, Stop: 1796439777, Size: 33554432, RepoSize: 2602114,
			ArchiveStart: "000000010000000000000010", ArchiveStop: "000000010000000000000010",
		}, got["20261205-030041F"])
		require.Equal(t, "diff", got["20261205-030041F_20261206-030040D"].Type)
	})
	for _, tc := range []struct {
		name, data string
		want       []string // labels, sorted; nil for none
		wantErr    string
	}{
		{name: "empty", data: ""},
		{name: "comments and blank lines", data: "# written by hand\n\n[backup:current]\n  # none yet\n"},
		{name: "other sections' JSON ignored", data: "[db:history]\n1={\"db-version\":\"16\"}\n[backup:current]\n20261203-030041F={\"backup-type\":\"full\"}\n", want: []string{"20261203-030041F"}},
		{name: "line without =", data: "[backrest]\nbackrest-format=5\ngarbage\n", wantErr: "line 3 is not key=value"},
		{name: "value not JSON", data: "[backup:current]\n20261203-030041F=full\n", wantErr: "line 2, backup 20261203-030041F"},
		{name: "truncated JSON", data: "[backup:current]\n20261203-030041F={\"backup-type\":\"fu\n", wantErr: "backup 20261203-030041F"},
		{name: "wrong JSON type", data: "[backup:current]\n20261203-030041F={\"backup-timestamp-stop\":\"yesterday\"}\n", wantErr: "backup 20261203-030041F"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseBackupInfo([]byte(tc.data))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, slices.Sorted(maps.Keys(got)))
		})
	}
}

// StoredBackups lists every full backup of backup.info with its times, sizes and WAL
// segments, oldest first, leaving out the differential one and the repository's other files.
func TestStoredBackupsListsFullBackups(t *testing.T) {
	got, err := Engine{}.StoredBackups(t.Context(), repository(), testRepo, "")
	require.NoError(t, err)
	require.Equal(t, []engine.StoredBackup{backup1203, backup1204, backup1205}, got)
}

// StoredBackups reads every stanza of the repository, each oldest first, and a repository
// at the bucket's top ("/production") has keys without a leading "/".
func TestStoredBackupsStanzasAndPaths(t *testing.T) {
	s := fakeStore{}
	for _, dir := range []string{"production/backup/ledger/", "production/backup/orders/"} {
		s[dir+"backup.info"] = []byte(backupInfo)
		for _, label := range []string{"20261204-030039F", "20261203-030041F"} {
			addBackup(s, dir, label)
		}
	}
	// Another namespace's repository under the same top is not this one's.
	s["staging/backup/ledger/backup.info"] = []byte(backupInfo)
	addBackup(s, "staging/backup/ledger/", "20261205-030041F")

	got, err := Engine{}.StoredBackups(t.Context(), s, "/production", "")
	require.NoError(t, err)
	orders1203, orders1204 := backup1203, backup1204
	orders1203.Database, orders1204.Database = "orders", "orders"
	require.Equal(t, []engine.StoredBackup{backup1203, backup1204, orders1203, orders1204}, got)
}

// A backup is listed only while backup.info names it as full and its directory holds a
// manifest (or its copy) and pg_data/.
func TestStoredBackupsRestorableOnly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(s fakeStore)
		want   []engine.StoredBackup
	}{
		{name: "untouched", change: func(fakeStore) {}, want: []engine.StoredBackup{backup1203, backup1204, backup1205}},
		{
			name:   "directory deleted by hand",
			change: func(s fakeStore) { _ = s.DeleteAll(t.Context(), ledgerDir+"20261204-030039F/") },
			want:   []engine.StoredBackup{backup1203, backup1205},
		},
		{
			name: "manifest and its copy gone, pg_data left",
			change: func(s fakeStore) {
				delete(s, ledgerDir+"20261203-030041F/backup.manifest")
				delete(s, ledgerDir+"20261203-030041F/backup.manifest.copy")
			},
			want: []engine.StoredBackup{backup1204, backup1205},
		},
		{
			name:   "only the manifest's copy left",
			change: func(s fakeStore) { delete(s, ledgerDir+"20261203-030041F/backup.manifest") },
			want:   []engine.StoredBackup{backup1203, backup1204, backup1205},
		},
		{
			name:   "only the manifest left, copy gone",
			change: func(s fakeStore) { delete(s, ledgerDir+"20261203-030041F/backup.manifest.copy") },
			want:   []engine.StoredBackup{backup1203, backup1204, backup1205},
		},
		{
			name: "pg_data gone, manifests left",
			change: func(s fakeStore) {
				_ = s.DeleteAll(t.Context(), ledgerDir+"20261205-030041F/pg_data/")
			},
			want: []engine.StoredBackup{backup1203, backup1204},
		},
		{
			name: "in progress: directory not yet in backup.info",
			change: func(s fakeStore) {
				s[ledgerDir+"20261206-030040F/pg_data/PG_VERSION.gz"] = []byte("16")
				s[ledgerDir+"20261206-030040F/backup.manifest.copy"] = []byte("[backup]\n")
			},
			want: []engine.StoredBackup{backup1203, backup1204, backup1205},
		},
		{
			name: "in backup.info, label not of a full backup",
			change: func(s fakeStore) {
				info := strings.ReplaceAll(backupInfo, "20261204-030039F=", "20261204-030039I=")
				s[ledgerDir+"backup.info"], s[ledgerDir+"backup.info.copy"] = []byte(info), []byte(info)
				addBackup(s, ledgerDir, "20261204-030039I")
			},
			want: []engine.StoredBackup{backup1203, backup1205},
		},
		{
			name: "full label whose entry is not a full backup",
			change: func(s fakeStore) {
				info := strings.Replace(backupInfo, `"backup-type":"full"`, `"backup-type":"incr"`, 1)
				s[ledgerDir+"backup.info"], s[ledgerDir+"backup.info.copy"] = []byte(info), []byte(info)
			},
			want: []engine.StoredBackup{backup1204, backup1205},
		},
		{
			name: "backup.info missing, backup.info.copy read",
			change: func(s fakeStore) {
				delete(s, ledgerDir+"backup.info")
			},
			want: []engine.StoredBackup{backup1203, backup1204, backup1205},
		},
		{
			name: "backup.info garbled, backup.info.copy read",
			change: func(s fakeStore) {
				s[ledgerDir+"backup.info"] = []byte(backupInfo[:len(backupInfo)/3])
			},
			want: []engine.StoredBackup{backup1203, backup1204, backup1205},
		},
		{
			name: "stanza without any backup.info (stanza-create not done)",
			change: func(s fakeStore) {
				delete(s, ledgerDir+"backup.info")
				delete(s, ledgerDir+"backup.info.copy")
			},
			want: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := repository()
			tc.change(s)
			got, err := Engine{}.StoredBackups(t.Context(), s, testRepo, "")
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// A stanza without backup.info lists nothing and the other stanzas are still listed.
func TestStoredBackupsStanzaWithoutIndex(t *testing.T) {
	s := repository()
	s["databases/production/backup/orders/20261205-030041F/pg_data/PG_VERSION.gz"] = []byte("16")
	s["databases/production/backup/orders/20261205-030041F/backup.manifest"] = []byte("[backup]\n")
	got, err := Engine{}.StoredBackups(t.Context(), s, testRepo, "")
	require.NoError(t, err)
	require.Equal(t, []engine.StoredBackup{backup1203, backup1204, backup1205}, got)
}

// A backup.info that cannot be parsed, with no readable copy, is an error naming the
// stanza and the file.
func TestStoredBackupsGarbledIndex(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(s fakeStore)
	}{
		{name: "garbled, no copy", change: func(s fakeStore) {
			s[ledgerDir+"backup.info"] = []byte("<?xml version=\"1.0\"?>\n<Error><Code>AccessDenied</Code></Error>\n")
			delete(s, ledgerDir+"backup.info.copy")
		}},
		{name: "missing, copy garbled", change: func(s fakeStore) {
			delete(s, ledgerDir+"backup.info")
			s[ledgerDir+"backup.info.copy"] = []byte("garbage\n")
		}},
		{name: "both garbled", change: func(s fakeStore) {
			bad := []byte(strings.Replace(backupInfo, `{"backrest-format":5`, `{"backrest-format":5,`, 1))
			s[ledgerDir+"backup.info"], s[ledgerDir+"backup.info.copy"] = bad, bad
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := repository()
			tc.change(s)
			got, err := Engine{}.StoredBackups(t.Context(), s, testRepo, "")
			require.ErrorContains(t, err, "stanza ledger")
			require.ErrorContains(t, err, "backup.info")
			require.NotErrorIs(t, err, engine.ErrObjectNotFound)
			require.Nil(t, got)
		})
	}
}

// DeleteStoredBackup removes every key of the backup's directory and nothing else: not the
// differential backup whose label starts with it, nor another stanza's backup of that label.
func TestDeleteStoredBackup(t *testing.T) {
	s := repository()
	addBackup(s, "databases/production/backup/orders/", "20261205-030041F")
	before := s.Keys()

	require.NoError(t, Engine{}.DeleteStoredBackup(t.Context(), s, testRepo, "ledger", "20261205-030041F"))

	var want []string
	for _, k := range before {
		if !strings.HasPrefix(k, ledgerDir+"20261205-030041F/") {
			want = append(want, k)
		}
	}
	require.Len(t, want, len(before)-5)
	require.Equal(t, want, s.Keys())
	require.Contains(t, s, ledgerDir+"20261205-030041F_20261206-030040D/backup.manifest")
	require.Contains(t, s, "databases/production/backup/orders/20261205-030041F/backup.manifest")

	got, err := Engine{}.StoredBackups(t.Context(), s, testRepo, "")
	require.NoError(t, err)
	require.Equal(t, []engine.StoredBackup{backup1203, backup1204}, got)
}

// DeleteStoredBackup returns ErrBackupNotFound, deleting nothing, for a label the store
// does not hold or that is not a full backup's.
func TestDeleteStoredBackupNotFound(t *testing.T) {
	for _, tc := range []struct{ name, database, id string }{
		{name: "unknown label", database: "ledger", id: "20261206-030040F"},
		{name: "unknown stanza", database: "orders", id: "20261205-030041F"},
		{name: "lower-cased label", database: "ledger", id: "20261205-030041f"},
		{name: "differential label", database: "ledger", id: "20261205-030041F_20261206-030040D"},
		{name: "label prefix", database: "ledger", id: "20261205-030041"},
		{name: "empty label", database: "ledger", id: ""},
		{name: "path", database: "ledger", id: "../ledger"},
		{name: "backup.history", database: "ledger", id: "backup.history"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := repository()
			before := s.Keys()
			err := Engine{}.DeleteStoredBackup(t.Context(), s, testRepo, tc.database, tc.id)
			require.ErrorIs(t, err, engine.ErrBackupNotFound)
			require.Equal(t, before, s.Keys())
		})
	}
}

// A stanza whose index cannot be read is left out, named in the error, and the others are
// still listed; a Database named reads its stanza alone.
func TestStoredBackupsOneDamagedStanza(t *testing.T) {
	s := repository()
	s["databases/production/backup/orders/backup.info"] = []byte("garbage\n")
	s["databases/production/backup/orders/20261205-030041F/backup.manifest"] = []byte("[backup]\n")
	got, err := Engine{}.StoredBackups(t.Context(), s, testRepo, "")
	require.ErrorContains(t, err, "stanza orders: backup.info")
	require.NotContains(t, err.Error(), "stanza ledger")
	require.Equal(t, []engine.StoredBackup{backup1203, backup1204, backup1205}, got)

	got, err = Engine{}.StoredBackups(t.Context(), s, testRepo, "ledger")
	require.NoError(t, err)
	require.Equal(t, []engine.StoredBackup{backup1203, backup1204, backup1205}, got)
	got, err = Engine{}.StoredBackups(t.Context(), s, testRepo, "unknown")
	require.NoError(t, err)
	require.Empty(t, got)
}

// A backup whose times pgBackRest could not have written (negative, ending before it
// started, or past 9999, which RFC 3339 cannot carry) is not listed.
func TestStoredBackupsImpossibleTimes(t *testing.T) {
	for name, change := range map[string]string{
		"negative start": `"backup-timestamp-start":-1,`,
		"past 9999":      `"backup-timestamp-stop":300000000000,`,
		"stop before":    `"backup-timestamp-stop":1,`,
	} {
		t.Run(name, func(t *testing.T) {
			s := repository()
			field, _, _ := strings.Cut(change, ":")
			info := string(s[ledgerDir+"backup.info"])
			i := strings.Index(info, "20261205-030041F={")
			j := i + strings.Index(info[i:], field)
			k := j + strings.Index(info[j:], ",") + 1
			info = info[:j] + change + info[k:]
			s[ledgerDir+"backup.info"], s[ledgerDir+"backup.info.copy"] = []byte(info), []byte(info)
			got, err := Engine{}.StoredBackups(t.Context(), s, testRepo, "ledger")
			require.NoError(t, err)
			require.Equal(t, []engine.StoredBackup{backup1203, backup1204}, got)
		})
	}
}
