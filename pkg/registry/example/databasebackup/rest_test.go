package databasebackup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/engine/enginetest"
	_ "example.com/database-apiserver/pkg/engine/postgresql"
	"example.com/database-apiserver/pkg/names"
)

// fakeStore is an in-memory engine.ObjectStore: object key -> content.
type fakeStore = enginetest.ObjectStore

// A full backup in a pgBackRest backup.info.
type infoBackup struct {
	label       string
	start, stop time.Time
}

func (b infoBackup) line() string {
	return fmt.Sprintf(`%s={"backrest-format":5,"backrest-version":"2.54.0","backup-archive-start":"000000010000000000000004","backup-archive-stop":"000000010000000000000005","backup-info-repo-size":2420349,"backup-info-size":31204867,"backup-timestamp-start":%d,"backup-timestamp-stop":%d,"backup-type":"full","db-id":1,"option-online":true}`,
		b.label, b.start.Unix(), b.stop.Unix())
}

// addStanza puts into s, under the repository at repo (a key prefix ending in "/"), the
// stanza's backup.info naming backups and each backup's directory.
func addStanza(s fakeStore, repo, stanza string, backups ...infoBackup) {
	dir := repo + "backup/" + stanza + "/"
	var info strings.Builder
	info.WriteString("[backrest]\nbackrest-checksum=\"0b1c\"\nbackrest-format=5\nbackrest-version=\"2.54.0\"\n\n[backup:current]\n")
	for _, b := range backups {
		info.WriteString(b.line() + "\n")
		d := dir + b.label + "/"
		s[d+"backup.manifest"] = []byte("[backup]\n")
		s[d+"backup.manifest.copy"] = []byte("[backup]\n")
		s[d+"pg_data/PG_VERSION.gz"] = []byte("16")
		s[d+"pg_data/global/pg_control.gz"] = []byte("control")
	}
	info.WriteString("\n[db]\ndb-id=1\ndb-version=\"16\"\n\n[db:history]\n1={\"db-system-id\":7445123456789012345,\"db-version\":\"16\"}\n")
	s[dir+"backup.info"] = []byte(info.String())
	s[dir+"backup.info.copy"] = []byte(info.String())
}

func at(day, hour, minute, second int) time.Time {
	return time.Date(2026, 12, day, hour, minute, second, 0, time.UTC)
}

var (
	// ledger's backups, production: three, the newest last.
	ledger1 = infoBackup{"20261203-030041F", at(3, 3, 0, 41), at(3, 3, 2, 13)}
	ledger2 = infoBackup{"20261204-030039F", at(4, 3, 0, 39), at(4, 3, 2, 20)}
	ledger3 = infoBackup{"20261205-030041F", at(5, 3, 0, 41), at(5, 3, 2, 57)}
	// orders' backup, production, a Database that has archived nothing yet.
	orders1 = infoBackup{"20261205-040000F", at(5, 4, 0, 0), at(5, 4, 1, 30)}
	// legacy's backups, production, a Database since deleted.
	legacy1 = infoBackup{"20261101-030000F", at(1, 3, 0, 0), at(1, 3, 5, 0)}
	legacy2 = infoBackup{"20261102-030000F", at(2, 3, 0, 0), at(2, 3, 5, 0)}
	// ledger's backup, staging: another namespace's repository in the same bucket.
	staging1 = infoBackup{"20261206-030000F", at(6, 3, 0, 0), at(6, 3, 1, 0)}

	// lastArchived is production's ledger's status.backup.lastArchivedTime.
	lastArchived = at(5, 9, 15, 0)
)

const (
	productionRepo = "databases/production/"
	stagingRepo    = "databases/staging/"
)

// database is a PostgreSQL Database backed up to bucket "backups" under "/databases" with
// the keys of Secret secret.
func database(namespace, name, secret string) examplev1.Database {
	return examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: examplev1.DatabaseSpec{
			Engine: examplev1.EnginePostgreSQL, Version: "16",
			Backup: &examplev1.DatabaseBackupPolicy{
				Schedule: "0 3 * * *",
				S3: examplev1.DatabaseBackupS3{
					Endpoint: "https://s3.example.com:9000", Bucket: "backups", Prefix: "/databases",
					Region: "eu-west-1", SecretName: secret,
				},
			},
		},
	}
}

// fixture is a REST over fake Databases, Secrets and a fake store.
type fixture struct {
	rest *REST
	// store is bucket "backups"; buckets the other buckets by name.
	store   fakeStore
	buckets map[string]fakeStore
	dbs     []examplev1.Database
	// secrets are the Secrets by "<namespace>/<name>".
	secrets map[string]*corev1.Secret
	mu      sync.Mutex
	opened  []engine.BackupStore
}

// newFixture: production has Databases ledger (archived up to lastArchived) and orders,
// legacy's backups are still in its repository; staging has its own ledger. Every Secret
// "store-keys" holds both keys.
func newFixture() *fixture {
	f := &fixture{store: fakeStore{}, buckets: map[string]fakeStore{}, secrets: map[string]*corev1.Secret{}}
	ledger := database("production", "ledger", "store-keys")
	ledger.Status.Backup = &examplev1.DatabaseBackupStatus{LastArchivedTime: &metav1.Time{Time: lastArchived}}
	f.dbs = []examplev1.Database{database("production", "orders", "store-keys"), ledger, database("staging", "ledger", "store-keys")}
	for _, ns := range []string{"production", "staging"} {
		f.secrets[ns+"/store-keys"] = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "store-keys", Namespace: ns},
			Data:       map[string][]byte{examplev1.BackupSecretKeyAccessKeyID: []byte("AKIA"), examplev1.BackupSecretKeySecretAccessKey: []byte("secret")},
		}
	}
	addStanza(f.store, productionRepo, "ledger", ledger1, ledger2, ledger3)
	addStanza(f.store, productionRepo, "legacy", legacy1, legacy2)
	addStanza(f.store, productionRepo, "orders", orders1)
	addStanza(f.store, stagingRepo, "ledger", staging1)
	f.store["databases/production/archive/ledger/archive.info"] = []byte("[db]\ndb-id=1\n")

	databases := func(_ context.Context, namespace string) ([]examplev1.Database, error) {
		var out []examplev1.Database
		for _, db := range f.dbs {
			if namespace == "" || db.Namespace == namespace {
				out = append(out, *db.DeepCopy())
			}
		}
		return out, nil
	}
	secrets := func(_ context.Context, namespace, name string) (*corev1.Secret, error) {
		s, ok := f.secrets[namespace+"/"+name]
		if !ok {
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
		}
		return s.DeepCopy(), nil
	}
	open := func(store *engine.BackupStore, secret *corev1.Secret) (engine.ObjectStore, error) {
		if string(secret.Data[examplev1.BackupSecretKeyAccessKeyID]) != "AKIA" {
			return nil, errors.New("wrong Secret")
		}
		f.mu.Lock()
		f.opened = append(f.opened, *store)
		f.mu.Unlock()
		if store.Bucket == "backups" {
			return f.store, nil
		}
		return f.buckets[store.Bucket], nil
	}
	f.rest = NewREST(databases, secrets, open)
	f.rest.now = func() time.Time { return at(6, 12, 0, 0) }
	return f
}

// recorder is a warning.Recorder keeping the warnings.
type recorder struct{ warnings []string }

func (r *recorder) AddWarning(_, text string) { r.warnings = append(r.warnings, text) }

func inNamespace(t *testing.T, namespace string) context.Context {
	return genericapirequest.WithNamespace(t.Context(), namespace)
}

func list(t *testing.T, f *fixture, ctx context.Context, opts *metainternalversion.ListOptions) *example.DatabaseBackupList {
	t.Helper()
	obj, err := f.rest.List(ctx, opts)
	require.NoError(t, err)
	return obj.(*example.DatabaseBackupList)
}

func itemNames(l *example.DatabaseBackupList) []string {
	out := []string{}
	for _, b := range l.Items {
		out = append(out, b.Namespace+"/"+b.Name)
	}
	return out
}

func timePtr(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

// The namespace's backups are listed from its one repository (each Database's oldest
// first), deleted Databases' included, with names, labels, times and ranges of restore.
func TestListBackups(t *testing.T) {
	f := newFixture()
	got := list(t, f, inNamespace(t, "production"), nil)

	require.Equal(t, []string{
		"production/ledger.20261203-030041f", "production/ledger.20261204-030039f", "production/ledger.20261205-030041f",
		"production/legacy.20261101-030000f", "production/legacy.20261102-030000f",
		"production/orders.20261205-040000f",
	}, itemNames(got))

	// One repository: orders and ledger name the same store, path and Secret.
	require.Equal(t, []engine.BackupStore{{
		Host: "s3.example.com", Port: 9000, Bucket: "backups", Region: "eu-west-1", Path: "/databases/production",
		SecretName: "store-keys", RetentionFullBackups: examplev1.DefaultRetentionFullBackups, Schedule: "0 3 * * *",
	}}, f.opened)

	require.Equal(t, example.DatabaseBackup{
		ObjectMeta: metav1.ObjectMeta{
			Name: "ledger.20261203-030041f", Namespace: "production",
			CreationTimestamp: metav1.NewTime(ledger1.stop),
			Labels:            map[string]string{names.InstanceLabel: "ledger"},
		},
		Database: "ledger", ID: "20261203-030041F", Engine: example.EnginePostgreSQL, Method: "pgBackRest full",
		StartTime: metav1.NewTime(ledger1.start), EndTime: metav1.NewTime(ledger1.stop),
		DataBytes: 31204867, StoredBytes: 2420349,
		LogStart: "000000010000000000000004", LogEnd: "000000010000000000000005",
		RecoverableFrom:  metav1.NewTime(ledger1.stop.Add(time.Second)),
		RecoverableUntil: timePtr(ledger2.stop),
	}, got.Items[0])

	for _, tc := range []struct {
		name     string
		database string
		from     time.Time
		until    *metav1.Time
	}{
		{"ledger.20261203-030041f", "ledger", ledger1.stop.Add(time.Second), timePtr(ledger2.stop)},
		{"ledger.20261204-030039f", "ledger", ledger2.stop.Add(time.Second), timePtr(ledger3.stop)},
		// The newest ends at the Database's last archived change.
		{"ledger.20261205-030041f", "ledger", ledger3.stop.Add(time.Second), timePtr(lastArchived)},
		{"legacy.20261101-030000f", "legacy", legacy1.stop.Add(time.Second), timePtr(legacy2.stop)},
		// A deleted Database's newest: no Database, no end known.
		{"legacy.20261102-030000f", "legacy", legacy2.stop.Add(time.Second), nil},
		// A Database that has archived nothing: no end known.
		{"orders.20261205-040000f", "orders", orders1.stop.Add(time.Second), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := slices.IndexFunc(got.Items, func(b example.DatabaseBackup) bool { return b.Name == tc.name })
			require.GreaterOrEqual(t, i, 0)
			b := got.Items[i]
			require.Equal(t, "production", b.Namespace)
			require.Equal(t, map[string]string{names.InstanceLabel: tc.database}, b.Labels)
			require.Equal(t, tc.database, b.Database)
			require.Equal(t, strings.ToUpper(strings.TrimPrefix(tc.name, tc.database+".")), b.ID)
			require.Equal(t, example.EnginePostgreSQL, b.Engine)
			require.True(t, tc.from.Equal(b.RecoverableFrom.Time), "recoverableFrom %s", b.RecoverableFrom)
			if tc.until == nil {
				require.Nil(t, b.RecoverableUntil)
			} else {
				require.NotNil(t, b.RecoverableUntil)
				require.True(t, tc.until.Equal(b.RecoverableUntil), "recoverableUntil %s, want %s", b.RecoverableUntil, tc.until)
			}
		})
	}
}

// lastArchivedTime ends the newest backup's range only when it is after the backup's end.
func TestListLastArchivedBeforeNewest(t *testing.T) {
	f := newFixture()
	f.dbs[1].Status.Backup.LastArchivedTime = timePtr(ledger3.stop.Add(-time.Minute))
	got := list(t, f, inNamespace(t, "production"), nil)
	i := slices.IndexFunc(got.Items, func(b example.DatabaseBackup) bool { return b.Name == "ledger.20261205-030041f" })
	require.GreaterOrEqual(t, i, 0)
	require.Nil(t, got.Items[i].RecoverableUntil)
}

// A Database's lastArchivedTime ends its newest backup's range only in the repository it
// archives to now: moved to another bucket, its old backups there have no known end.
func TestListLastArchivedOtherRepository(t *testing.T) {
	f := newFixture()
	f.dbs[1].Spec.Backup.S3.Bucket = "new-backups"
	f.buckets["new-backups"] = fakeStore{}
	got := list(t, f, inNamespace(t, "production"), nil)
	i := slices.IndexFunc(got.Items, func(b example.DatabaseBackup) bool { return b.Name == "ledger.20261205-030041f" })
	require.GreaterOrEqual(t, i, 0, "orders still names the old bucket: %v", itemNames(got))
	require.Nil(t, got.Items[i].RecoverableUntil)
}

// Without a namespace every namespace's repositories are listed, each backup in its own
// namespace; in a namespace only its own.
func TestListNamespaces(t *testing.T) {
	f := newFixture()
	require.Equal(t, []string{
		"production/ledger.20261203-030041f", "production/ledger.20261204-030039f", "production/ledger.20261205-030041f",
		"production/legacy.20261101-030000f", "production/legacy.20261102-030000f",
		"production/orders.20261205-040000f", "staging/ledger.20261206-030000f",
	}, itemNames(list(t, f, t.Context(), nil)))
	require.Equal(t, []string{"staging/ledger.20261206-030000f"}, itemNames(list(t, f, inNamespace(t, "staging"), nil)))
	require.Equal(t, []string{}, itemNames(list(t, f, inNamespace(t, "empty"), nil)))
}

// The label selector (app.kubernetes.io/instance) and the field selectors database,
// metadata.name and metadata.namespace filter the list.
func TestListSelectors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		label  string
		field  string
		want   []string
		allNSs bool
	}{
		{name: "field database", field: "database=ledger", want: []string{
			"production/ledger.20261203-030041f", "production/ledger.20261204-030039f", "production/ledger.20261205-030041f"}},
		{name: "field database of a deleted Database", field: "database=legacy", want: []string{
			"production/legacy.20261101-030000f", "production/legacy.20261102-030000f"}},
		{name: "field database not", field: "database!=ledger,database!=legacy", want: []string{"production/orders.20261205-040000f"}},
		{name: "field metadata.name", field: "metadata.name=ledger.20261204-030039f", want: []string{"production/ledger.20261204-030039f"}},
		{name: "field metadata.namespace", field: "metadata.namespace=staging", allNSs: true, want: []string{"staging/ledger.20261206-030000f"}},
		{name: "label instance", label: names.InstanceLabel + "=orders", want: []string{"production/orders.20261205-040000f"}},
		{name: "label instance in", label: names.InstanceLabel + " in (orders,legacy)", want: []string{
			"production/legacy.20261101-030000f", "production/legacy.20261102-030000f", "production/orders.20261205-040000f"}},
		{name: "label and field", label: names.InstanceLabel + "=ledger", field: "database=orders", want: []string{}},
		{name: "label matching nothing", label: "team=payments", want: []string{}},
		{name: "field database matching nothing", field: "database=nope", want: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			opts := &metainternalversion.ListOptions{}
			if tc.label != "" {
				sel, err := labels.Parse(tc.label)
				require.NoError(t, err)
				opts.LabelSelector = sel
			}
			if tc.field != "" {
				sel, err := fields.ParseSelector(tc.field)
				require.NoError(t, err)
				opts.FieldSelector = sel
			}
			ctx := inNamespace(t, "production")
			if tc.allNSs {
				ctx = t.Context()
			}
			got := list(t, f, ctx, opts)
			require.NotNil(t, got.Items)
			require.Equal(t, tc.want, itemNames(got))
		})
	}
}

// Get returns a backup of the namespace's repository, a deleted Database's too, and
// NotFound for a name no store of the namespace holds.
func TestGet(t *testing.T) {
	for _, tc := range []struct {
		name, namespace, get string
		found                bool
	}{
		{name: "backup", namespace: "production", get: "ledger.20261204-030039f", found: true},
		{name: "deleted Database's backup", namespace: "production", get: "legacy.20261102-030000f", found: true},
		{name: "unknown label", namespace: "production", get: "ledger.20261206-030000f"},
		{name: "id not lower-cased", namespace: "production", get: "ledger.20261204-030039F"},
		{name: "unknown database", namespace: "production", get: "ghost.20261204-030039f"},
		{name: "other namespace's backup", namespace: "staging", get: "ledger.20261204-030039f"},
		{name: "namespace without Databases", namespace: "empty", get: "ledger.20261204-030039f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			obj, err := f.rest.Get(inNamespace(t, tc.namespace), tc.get, &metav1.GetOptions{})
			if !tc.found {
				require.True(t, apierrors.IsNotFound(err), "%v", err)
				require.Nil(t, obj)
				return
			}
			require.NoError(t, err)
			b := obj.(*example.DatabaseBackup)
			require.Equal(t, tc.get, b.Name)
			require.Equal(t, tc.namespace, b.Namespace)
		})
	}
}

// A repository that cannot be read (its Secret missing or incomplete, its index garbled)
// leaves its backups out of a list with a warning naming why, and makes a get of a name
// not found elsewhere a 503; another repository of the namespace is still read.
func TestUnreadableStore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(f *fixture)
		warning string
	}{
		{
			name:    "Secret missing",
			change:  func(f *fixture) { delete(f.secrets, "production/store-keys") },
			warning: "its Secret store-keys does not exist",
		},
		{
			name: "Secret without the secret key",
			change: func(f *fixture) {
				delete(f.secrets["production/store-keys"].Data, examplev1.BackupSecretKeySecretAccessKey)
			},
			warning: "its Secret store-keys has no key secretAccessKey",
		},
		{
			name: "open fails",
			change: func(f *fixture) {
				f.secrets["production/store-keys"].Data[examplev1.BackupSecretKeyAccessKeyID] = []byte("other")
			},
			warning: "wrong Secret",
		},
		{
			name: "backup.info garbled",
			change: func(f *fixture) {
				f.store[productionRepo+"backup/legacy/backup.info"] = []byte("<Error><Code>SlowDown</Code></Error>\n")
				delete(f.store, productionRepo+"backup/legacy/backup.info.copy")
			},
			warning: "stanza legacy",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			tc.change(f)
			// A second repository of the namespace, another bucket with its own Secret,
			// still read.
			other := database("production", "reports", "other-keys")
			other.Spec.Backup.S3.Bucket = "reports"
			f.dbs = append(f.dbs, other)
			f.secrets["production/other-keys"] = &corev1.Secret{Data: map[string][]byte{
				examplev1.BackupSecretKeyAccessKeyID: []byte("AKIA"), examplev1.BackupSecretKeySecretAccessKey: []byte("s"),
			}}
			f.buckets["reports"] = fakeStore{}
			addStanza(f.buckets["reports"], productionRepo, "reports", infoBackup{"20261205-050000F", at(5, 5, 0, 0), at(5, 5, 1, 0)})

			rec := &recorder{}
			ctx := warning.WithWarningRecorder(inNamespace(t, "production"), rec)
			got := list(t, f, ctx, nil)
			require.Len(t, rec.warnings, 1)
			require.Contains(t, rec.warnings[0], "the store of Database production/")
			require.Contains(t, rec.warnings[0], tc.warning)
			require.Contains(t, itemNames(got), "production/reports.20261205-050000f")
			require.NotContains(t, itemNames(got), "production/legacy.20261102-030000f")

			_, err := f.rest.Get(inNamespace(t, "production"), "legacy.20261102-030000f", &metav1.GetOptions{})
			require.True(t, apierrors.IsServiceUnavailable(err), "%v", err)
			require.ErrorContains(t, err, tc.warning)
			_, _, err = f.rest.Delete(inNamespace(t, "production"), "legacy.20261102-030000f", nil, &metav1.DeleteOptions{})
			require.True(t, apierrors.IsServiceUnavailable(err), "%v", err)

			// What the readable repository holds is still found.
			_, err = f.rest.Get(inNamespace(t, "production"), "reports.20261205-050000f", &metav1.GetOptions{})
			require.NoError(t, err)
		})
	}
}

// A readable namespace gives no warning.
func TestListNoWarning(t *testing.T) {
	rec := &recorder{}
	list(t, newFixture(), warning.WithWarningRecorder(inNamespace(t, "production"), rec), nil)
	require.Empty(t, rec.warnings)
}

// Delete removes the backup's directory from the store and returns it; a dry run, a
// refused validation and an unknown name remove nothing.
func TestDelete(t *testing.T) {
	const name = "ledger.20261204-030039f"
	deleted := productionRepo + "backup/ledger/20261204-030039F/"
	for _, tc := range []struct {
		name     string
		opts     *metav1.DeleteOptions
		validate func(ctx context.Context, obj runtime.Object) error
		delete   string
		removed  bool
		notFound bool
		refused  bool
		conflict bool
	}{
		{name: "delete", delete: name, opts: &metav1.DeleteOptions{}, removed: true},
		{name: "nil options", delete: name, removed: true},
		{name: "dry run", delete: name, opts: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}},
		{name: "unknown name", delete: "ledger.20261206-030000f", opts: &metav1.DeleteOptions{}, notFound: true},
		{name: "not a Database's name", delete: "../ledger.20261204-030039f", opts: &metav1.DeleteOptions{}, notFound: true},
		// A backup has no uid or resourceVersion: a precondition on either never holds.
		{name: "uid precondition", delete: name, conflict: true,
			opts: &metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions("deadbeef")}},
		{name: "resourceVersion precondition", delete: name, conflict: true,
			opts: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To("1")}}},
		{name: "validation refuses", delete: name, opts: &metav1.DeleteOptions{}, refused: true,
			validate: func(context.Context, runtime.Object) error {
				return apierrors.NewForbidden(schema.GroupResource{}, name, errors.New("no"))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			before := f.store.Keys()
			ctx := inNamespace(t, "production")
			obj, immediate, err := f.rest.Delete(ctx, tc.delete, tc.validate, tc.opts)
			switch {
			case tc.notFound:
				require.True(t, apierrors.IsNotFound(err), "%v", err)
			case tc.refused:
				require.True(t, apierrors.IsForbidden(err), "%v", err)
			case tc.conflict:
				require.True(t, apierrors.IsConflict(err), "%v", err)
			default:
				require.NoError(t, err)
				require.True(t, immediate)
				b := obj.(*example.DatabaseBackup)
				require.Equal(t, name, b.Name)
				require.Equal(t, "20261204-030039F", b.ID)
			}

			if !tc.removed {
				require.Equal(t, before, f.store.Keys())
				return
			}
			var want []string
			for _, k := range before {
				if !strings.HasPrefix(k, deleted) {
					want = append(want, k)
				}
			}
			require.Len(t, want, len(before)-4)
			require.Equal(t, want, f.store.Keys())
			_, err = f.rest.Get(ctx, name, &metav1.GetOptions{})
			require.True(t, apierrors.IsNotFound(err), "%v", err)
			// The older backup's range now runs to the next one left.
			obj, err = f.rest.Get(ctx, "ledger.20261203-030041f", &metav1.GetOptions{})
			require.NoError(t, err)
			require.True(t, obj.(*example.DatabaseBackup).RecoverableUntil.Equal(timePtr(ledger3.stop)))
		})
	}
}

// ConvertToTable gives a row per backup, each with a cell per column definition, and no
// definitions when asked for no headers.
func TestConvertToTable(t *testing.T) {
	f := newFixture()
	ctx := inNamespace(t, "production")
	l := list(t, f, ctx, nil)
	one, err := f.rest.Get(ctx, "legacy.20261102-030000f", &metav1.GetOptions{})
	require.NoError(t, err)
	for _, tc := range []struct {
		name     string
		obj      runtime.Object
		opts     runtime.Object
		rows     int
		noHeader bool
	}{
		{name: "list", obj: l, rows: 6},
		{name: "one backup", obj: one, rows: 1},
		{name: "empty list", obj: &example.DatabaseBackupList{}, rows: 0},
		{name: "list without headers", obj: l, opts: &metav1.TableOptions{NoHeaders: true}, rows: 6, noHeader: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table, err := f.rest.ConvertToTable(ctx, tc.obj, tc.opts)
			require.NoError(t, err)
			require.Len(t, table.Rows, tc.rows)
			if tc.noHeader {
				require.Empty(t, table.ColumnDefinitions)
			} else {
				require.NotEmpty(t, table.ColumnDefinitions)
			}
			for _, r := range table.Rows {
				require.Len(t, r.Cells, len(columns))
				require.IsType(t, &example.DatabaseBackup{}, r.Object.Object)
			}
		})
	}

	table, err := f.rest.ConvertToTable(ctx, l, nil)
	require.NoError(t, err)
	// The newest ledger backup: name, Database, end, range, size, age.
	require.Equal(t, []any{
		"ledger.20261205-030041f", "ledger", "2026-12-05T03:02:57Z", "2026-12-05T03:02:58Z", "2026-12-05T09:15:00Z",
		"30Mi", "32h",
	}, table.Rows[2].Cells[:7])
	// A deleted Database's newest: recoverableUntil unknown.
	require.Nil(t, table.Rows[4].Cells[4])

	_, err = f.rest.ConvertToTable(ctx, &example.Database{}, nil)
	require.Error(t, err)
}

// A warning carries what a store answered on one printable line, however the store wrote
// it (an HTML page, bytes that are not UTF-8), cut to a bound.
func TestPrintable(t *testing.T) {
	require.Equal(t, "the store answered  <html> <body>Bad Gateway</body></html>  x",
		printable("the store answered \n<html>\r<body>Bad Gateway</body></html>\t\xffx"))
	long := printable(strings.Repeat("é", 400))
	require.LessOrEqual(t, len(long), maxWarning+3)
	require.True(t, utf8.ValidString(long))
	require.True(t, strings.HasSuffix(long, "..."))
}
