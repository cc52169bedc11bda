// Package databasebackup serves databasebackups: the backups the stores of a namespace's
// Databases hold, read from the stores on each request and never kept in etcd.
package databasebackup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

// StoreTimeout bounds what one request spends reading one store.
const StoreTimeout = 20 * time.Second

// Databases lists the Databases of namespace ("": of every namespace), as the API serves
// them.
type Databases func(ctx context.Context, namespace string) ([]examplev1.Database, error)

// Secrets reads the Secret name of namespace.
type Secrets func(ctx context.Context, namespace, name string) (*corev1.Secret, error)

// OpenStore opens the store of a Database's spec.backup with the keys and CA of its Secret.
type OpenStore func(store *engine.BackupStore, secret *corev1.Secret) (engine.ObjectStore, error)

// REST serves databasebackups: get, list and delete. The backups listed in a namespace are
// those of the repositories its Databases' spec.backup name (one per distinct store, engine
// and Secret), deleted Databases' included; a store that cannot be read leaves its backups
// out of a list with a warning, and makes a get or delete of a backup it may hold a 503.
type REST struct {
	databases Databases
	secrets   Secrets
	open      OpenStore
	// now is the clock (tests set it).
	now func() time.Time
}

// NewREST returns the REST of databasebackups.
func NewREST(databases Databases, secrets Secrets, open OpenStore) *REST {
	return &REST{databases: databases, secrets: secrets, open: open, now: time.Now}
}

var (
	_ rest.Storage              = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.KindProvider         = &REST{}
	_ rest.SingularNameProvider = &REST{}
	_ rest.Getter               = &REST{}
	_ rest.Lister               = &REST{}
	_ rest.GracefulDeleter      = &REST{}
	_ rest.TableConvertor       = &REST{}
	_ rest.ShortNamesProvider   = &REST{}
)

// New, NewList, Destroy, NamespaceScoped, Kind, GetSingularName, ShortNames and
// ConvertToTable describe databasebackups to the generic server: namespaced, kind
// DatabaseBackup, short name dbbackup, in no category (kubectl get all reads no store), and
// printed by convertToTable.
func (r *REST) New() runtime.Object     { return &example.DatabaseBackup{} }
func (r *REST) NewList() runtime.Object { return &example.DatabaseBackupList{} }
func (r *REST) Destroy()                {}
func (r *REST) NamespaceScoped() bool   { return true }
func (r *REST) Kind() string            { return "DatabaseBackup" }
func (r *REST) GetSingularName() string { return "databasebackup" }
func (r *REST) ShortNames() []string    { return []string{"dbbackup"} }
func (r *REST) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return convertToTable(obj, opts, r.now())
}

// Name is the name of the DatabaseBackup of backup id of the Database database:
// "<database>.<id, lower-cased>", unique in a namespace since a Database's name is a DNS
// label (no ".").
func Name(database, id string) string { return database + "." + strings.ToLower(id) }

// Get returns the DatabaseBackup name of the request's namespace: NotFound when no store of
// the namespace holds it, ServiceUnavailable when a store it may be in cannot be read.
func (r *REST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	b, err := r.find(ctx, name)
	if err != nil {
		return nil, err
	}
	return &b.backup, nil
}

// find reads the backup name of the request's namespace from the stores.
func (r *REST) find(ctx context.Context, name string) (*located, error) {
	database, _, _ := strings.Cut(name, ".")
	if len(validation.IsDNS1035Label(database)) > 0 {
		return nil, apierrors.NewNotFound(example.Resource("databasebackups"), name)
	}
	backups, failures, err := r.read(ctx, genericapirequest.NamespaceValue(ctx), database)
	if err != nil {
		return nil, err
	}
	for i := range backups {
		if backups[i].backup.Name == name {
			return &backups[i], nil
		}
	}
	if len(failures) > 0 {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("backup %s may be in a store that cannot be read: %s", name, strings.Join(failures, "; ")))
	}
	return nil, apierrors.NewNotFound(example.Resource("databasebackups"), name)
}

// List returns the DatabaseBackups of the request's namespace (of every namespace without
// one) that match the label and field selectors (metadata.name, metadata.namespace,
// database), each Database's oldest first. A store that cannot be read is a warning.
func (r *REST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	backups, failures, err := r.read(ctx, genericapirequest.NamespaceValue(ctx), "")
	if err != nil {
		return nil, err
	}
	for _, f := range failures {
		warning.AddWarning(ctx, "", printable(f))
	}
	label, field := labels.Everything(), fields.Everything()
	if options != nil && options.LabelSelector != nil {
		label = options.LabelSelector
	}
	if options != nil && options.FieldSelector != nil {
		field = options.FieldSelector
	}
	list := &example.DatabaseBackupList{Items: []example.DatabaseBackup{}}
	for _, b := range backups {
		if label.Matches(labels.Set(b.backup.Labels)) && field.Matches(Fields(&b.backup)) {
			list.Items = append(list.Items, b.backup)
		}
	}
	return list, nil
}

// Fields are the fields a DatabaseBackup is selected by.
func Fields(b *example.DatabaseBackup) fields.Set {
	return fields.Set{"metadata.name": b.Name, "metadata.namespace": b.Namespace, examplev1.FieldDatabase: b.Database}
}

// Delete removes the backup name from its store and returns it as it was. A dry run removes
// nothing. Errors: those of Get, and ServiceUnavailable when the store refuses.
func (r *REST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	b, err := r.find(ctx, name)
	if err != nil {
		return nil, false, err
	}
	if options != nil && options.Preconditions != nil && (options.Preconditions.UID != nil || options.Preconditions.ResourceVersion != nil) {
		// A DatabaseBackup read from the store has neither: no precondition on them holds,
		// as the generic store answers a precondition that does not.
		return nil, false, apierrors.NewConflict(example.Resource("databasebackups"), name,
			errors.New("a DatabaseBackup has no uid or resourceVersion: a precondition on them cannot hold"))
	}
	if deleteValidation != nil {
		if err := deleteValidation(ctx, &b.backup); err != nil {
			return nil, false, err
		}
	}
	if options != nil && len(options.DryRun) > 0 {
		return &b.backup, true, nil
	}
	sctx, cancel := context.WithTimeout(ctx, StoreTimeout)
	defer cancel()
	err = b.from.engine.DeleteStoredBackup(sctx, b.from.objects, b.from.store.Path, b.backup.Database, b.backup.ID)
	if errors.Is(err, engine.ErrBackupNotFound) {
		return nil, false, apierrors.NewNotFound(example.Resource("databasebackups"), name)
	}
	if err != nil {
		return nil, false, apierrors.NewServiceUnavailable(fmt.Sprintf("deleting backup %s from %s: %v", name, b.from, err))
	}
	return &b.backup, true, nil
}

// repository is one backup repository a namespace's Databases name: a store, the path in
// its bucket, and the engine whose backups it holds, read with one Secret's keys.
type repository struct {
	key     repositoryKey
	engine  engine.Backups
	store   *engine.BackupStore
	objects engine.ObjectStore
	// namespace and database are those of the first Database (by name) that names it;
	// database is for messages.
	namespace, database string
}

// repositoryOf is the repository db's spec.backup names, not opened yet; false when db has
// no spec.backup or its engine takes no backups.
func repositoryOf(db *examplev1.Database) (*repository, bool) {
	e, _ := engine.Lookup(db.Spec.Engine)
	backups, ok := e.(engine.Backups)
	store, set := engine.ResolveBackupStore(db, false)
	if !ok || !set {
		return nil, false
	}
	key := repositoryKey{db.Spec.Engine, store.Host, store.Bucket, store.Region, store.Path, store.SecretName, store.Port}
	return &repository{key: key, engine: backups, store: store, namespace: db.Namespace, database: db.Name}, true
}

func (r repository) String() string {
	return fmt.Sprintf("the store of Database %s/%s (bucket %s at %s:%d, path %s)", r.namespace, r.database, r.store.Bucket, r.store.Host, r.store.Port, r.store.Path)
}

// located is a backup and the repository it was read from.
type located struct {
	backup example.DatabaseBackup
	from   *repository
}

// repositoryKey tells repositories apart: two Databases that name the same store, path,
// engine and Secret share one.
type repositoryKey struct {
	engine                             examplev1.Engine
	host, bucket, region, path, secret string
	port                               int32
}

// read returns the backups of namespace's repositories ("": every namespace's), of the
// Database database ("": every Database's), and why each repository, or part of one, that
// could not be read could not; an error only when the Databases cannot be listed.
// Repositories are read side by side, each within StoreTimeout.
func (r *REST) read(ctx context.Context, namespace, database string) ([]located, []string, error) {
	dbs, err := r.databases(ctx, namespace)
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(dbs, func(a, b examplev1.Database) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	// archived is each Database's last archived change, in the repository it archives to
	// now, which ends its newest backup's range there.
	archived := map[repositoryKey]map[string]*metav1.Time{}
	seen := map[repositoryKey]bool{}
	var repos []*repository
	var failures []string
	for i := range dbs {
		db := &dbs[i]
		repo, ok := repositoryOf(db)
		if !ok {
			continue
		}
		if db.Status.Backup != nil && db.Status.Backup.LastArchivedTime != nil {
			if archived[repo.key] == nil {
				archived[repo.key] = map[string]*metav1.Time{}
			}
			archived[repo.key][db.Name] = db.Status.Backup.LastArchivedTime
		}
		if seen[repo.key] {
			continue
		}
		seen[repo.key] = true
		if repo.objects, err = r.openRepository(ctx, repo); err != nil {
			failures = append(failures, fmt.Sprintf("%s cannot be read: %v", repo, err))
			continue
		}
		repos = append(repos, repo)
	}
	stored := make([][]engine.StoredBackup, len(repos))
	errs := make([]error, len(repos))
	var wg sync.WaitGroup
	for i, repo := range repos {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, StoreTimeout)
			defer cancel()
			stored[i], errs[i] = repo.engine.StoredBackups(sctx, repo.objects, repo.store.Path, database)
		})
	}
	wg.Wait()
	var found []located
	names := map[string]bool{}
	for i, repo := range repos {
		if errs[i] != nil {
			failures = append(failures, fmt.Sprintf("%s cannot be read in full: %v", repo, errs[i]))
		}
		for j, s := range stored[i] {
			b := toObject(repo.namespace, repo.key.engine, s)
			if names[repo.namespace+"/"+b.Name] {
				continue
			}
			names[repo.namespace+"/"+b.Name] = true
			if j+1 < len(stored[i]) && stored[i][j+1].Database == s.Database {
				until := metav1.NewTime(stored[i][j+1].End)
				b.RecoverableUntil = &until
			} else if t := archived[repo.key][s.Database]; t != nil && t.After(s.End) {
				b.RecoverableUntil = t.DeepCopy()
			}
			found = append(found, located{backup: b, from: repo})
		}
	}
	return found, failures, nil
}

// printable is text as a Warning header carries it: printable UTF-8 on one line (what else
// a store answered becomes a space), at most maxWarning bytes.
func printable(text string) string {
	text = strings.ToValidUTF8(text, " ")
	text = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, text)
	if len(text) > maxWarning {
		cut := maxWarning
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "..."
	}
	return text
}

// maxWarning bounds a warning's length, in bytes.
const maxWarning = 512

// openRepository opens repo's store with the keys of its Secret in repo's namespace.
func (r *REST) openRepository(ctx context.Context, repo *repository) (engine.ObjectStore, error) {
	store := repo.store
	secret, err := r.secrets(ctx, repo.namespace, store.SecretName)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("its Secret %s does not exist", store.SecretName)
	}
	if err != nil {
		return nil, fmt.Errorf("its Secret %s cannot be read: %v", store.SecretName, err)
	}
	for _, k := range []string{examplev1.BackupSecretKeyAccessKeyID, examplev1.BackupSecretKeySecretAccessKey} {
		if len(secret.Data[k]) == 0 {
			return nil, fmt.Errorf("its Secret %s has no key %s", store.SecretName, k)
		}
	}
	return r.open(store, secret)
}

// toObject is the DatabaseBackup of a stored backup of namespace.
func toObject(namespace string, e examplev1.Engine, s engine.StoredBackup) example.DatabaseBackup {
	return example.DatabaseBackup{
		ObjectMeta: metav1.ObjectMeta{
			Name: Name(s.Database, s.ID), Namespace: namespace,
			// The backup came to be, restorable, when it ended.
			CreationTimestamp: metav1.NewTime(s.End),
			Labels:            map[string]string{names.InstanceLabel: s.Database},
		},
		Database:        s.Database,
		ID:              s.ID,
		Engine:          example.Engine(e),
		Method:          s.Method,
		StartTime:       metav1.NewTime(s.Start),
		EndTime:         metav1.NewTime(s.End),
		DataBytes:       s.DataBytes,
		StoredBytes:     s.StoredBytes,
		LogStart:        s.LogStart,
		LogEnd:          s.LogEnd,
		RecoverableFrom: metav1.NewTime(s.End.Add(time.Second)),
	}
}

// RecoverableFrom reads, from the store db's spec.backup names (with the keys of its Secret
// in db's namespace), the first time each backup of the Database spec.restore.database names
// restores to (the second after its end), oldest first. It is an error when db has no
// spec.backup or spec.restore, its engine takes no backups, or the store cannot be read.
func (r *REST) RecoverableFrom(ctx context.Context, db *examplev1.Database) ([]time.Time, error) {
	repo, ok := repositoryOf(db)
	if !ok || db.Spec.Restore == nil {
		return nil, fmt.Errorf("Database %s restores no backups", db.Name)
	}
	objects, err := r.openRepository(ctx, repo)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, StoreTimeout)
	defer cancel()
	stored, err := repo.engine.StoredBackups(sctx, objects, repo.store.Path, db.Spec.Restore.Database)
	if err != nil {
		return nil, err
	}
	var from []time.Time
	for _, s := range stored {
		from = append(from, toObject(db.Namespace, db.Spec.Engine, s).RecoverableFrom.Time)
	}
	return from, nil
}
