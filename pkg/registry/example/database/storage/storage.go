// Package storage builds the etcd-backed REST storage of databases and of its
// status and scale subresources.
package storage

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	scalescheme "k8s.io/client-go/scale/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/apis/example/validation"
	"example.com/database-apiserver/pkg/registry/example/database"
)

// DatabaseStorage is the REST storage of databases and its subresources,
// all over one etcd store: Database serves databases, Status
// databases/status, Scale databases/scale, Connection databases/connection,
// Restart databases/restart, Switchover databases/switchover and Backup databases/backup.
type DatabaseStorage struct {
	Database   *REST
	Status     *StatusREST
	Scale      *ScaleREST
	Connection *ConnectionREST
	Restart    *RestartREST
	Switchover *SwitchoverREST
	Backup     *BackupREST
}

// NewStorage returns the storage of databases. scheme is the server's scheme,
// with example.com installed (install.Install); optsGetter gives the etcd
// configuration and storage decorator (watch cache) of the resource;
// typeConverter knows the example.com/v1 Database's schema (the server's
// OpenAPI models), for the field manager of databases/switchover, which writes
// spec.primary; clusterDomain is the cluster's DNS domain, which the hosts
// databases/connection shows end with. It returns an error if the store cannot
// be completed, e.g. a bad storage config, or the field manager cannot be built.
func NewStorage(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, typeConverter managedfields.TypeConverter, clusterDomain string) (DatabaseStorage, error) {
	strategy := database.NewStrategy(scheme)
	statusStrategy := database.NewStatusStrategy(strategy)

	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &example.Database{} },
		NewListFunc:               func() runtime.Object { return &example.DatabaseList{} },
		PredicateFunc:             database.MatchDatabase,
		DefaultQualifiedResource:  example.Resource("databases"),
		SingularQualifiedResource: example.Resource("database"),

		CreateStrategy:      strategy,
		UpdateStrategy:      strategy,
		DeleteStrategy:      strategy,
		ResetFieldsStrategy: strategy,

		TableConvertor: database.TableConvertor{},
	}
	options := &generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: database.GetAttrs}
	if err := store.CompleteWithOptions(options); err != nil {
		return DatabaseStorage{}, err
	}
	store.Storage.Storage = resourceVersionChecked{store.Storage.Storage}

	statusStore := *store
	statusStore.UpdateStrategy = statusStrategy
	statusStore.ResetFieldsStrategy = statusStrategy

	requestStore := *store
	requestStore.UpdateStrategy = database.NewRequestStrategy(strategy)

	// A switchover is an Update of spec.primary through the subresource "switchover", as
	// k8s.io/apiserver's handlers record a write of the resource itself (the create handler
	// of databases/switchover records only the DatabaseSwitchover body).
	switchoverFields, err := managedfields.NewDefaultFieldManager(typeConverter, scheme, scheme, scheme,
		examplev1.SchemeGroupVersion.WithKind("Database"), example.SchemeGroupVersion, "switchover", nil)
	if err != nil {
		return DatabaseStorage{}, fmt.Errorf("building the field manager of databases/switchover: %w", err)
	}

	databases := &REST{Store: store, now: time.Now}

	return DatabaseStorage{
		Database:   databases,
		Status:     &StatusREST{store: &statusStore},
		Scale:      &ScaleREST{store: store},
		Connection: &ConnectionREST{store: store, scheme: scheme, clusterDomain: clusterDomain},
		Restart:    &RestartREST{store: &requestStore, now: time.Now},
		Switchover: &SwitchoverREST{store: &requestStore, now: time.Now, fieldManager: switchoverFields},
		Backup:     &BackupREST{store: &requestStore, now: time.Now},
	}, nil
}

// REST serves databases: create, get, list, watch, update, patch, delete and
// deletecollection, through the generic store.
//
// It has no categories: in the "all" category `kubectl delete all --all`
// would delete Databases, and with them their data.
type REST struct {
	*genericregistry.Store
	now func() time.Time
	// SourceBackups reads a restore's source backups from the store at creation; nil: the
	// store is not read.
	SourceBackups SourceBackups
}

var (
	_ rest.ShortNamesProvider   = &REST{}
	_ rest.SingularNameProvider = &REST{}
	_ rest.StandardStorage      = &REST{}
)

// ShortNames returns the short names of databases: "db" (`kubectl get db`).
func (r *REST) ShortNames() []string {
	return []string{"db"}
}

// SourceBackups reads, from the store the Database db's spec.backup names, the first time
// each backup of the Database spec.restore.database names restores to, oldest first; an
// error when the store cannot be read.
type SourceBackups func(ctx context.Context, db *example.Database) ([]time.Time, error)

// Create is the generic store's Create, with the restore checks (checkRestore) run once
// the body passed its own validation (the strategy's) and admission (createValidation):
// nothing is read from a store for a request refused anyway.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	return r.Store.Create(ctx, obj, r.thenCheckRestore(createValidation), options)
}

// Update is the generic store's Update, with the restore checks of Create when it creates
// (a server-side apply or an update of a Database that does not exist).
func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.Store.Update(ctx, name, objInfo, r.thenCheckRestore(createValidation), updateValidation, forceAllowCreate, options)
}

// thenCheckRestore is createValidation, then checkRestore.
func (r *REST) thenCheckRestore(createValidation rest.ValidateObjectFunc) rest.ValidateObjectFunc {
	return func(ctx context.Context, obj runtime.Object) error {
		if createValidation != nil {
			if err := createValidation(ctx, obj); err != nil {
				return err
			}
		}
		return r.checkRestore(ctx, obj)
	}
}

// checkRestore checks, at creation, what spec.restore needs of more than the body. The store
// spec.backup names is read (REST.SourceBackups): a 422 on spec.restore.database when it
// holds no backup of that Database, and the first time its oldest backup restores to starts
// the recoverability window. A store that cannot be read is not checked here (the restore
// says why it fails, on the Restored condition); the window then starts at the source's own
// status.backup.firstRecoverableTime, when it exists and reports one, read from this store.
// A pointInTime outside the window, or later than now, is a 422
// (validation.ValidateRestoreWindow). Whoever may create a Database in the namespace may
// restore any of its Databases, so what a refusal states tells them nothing they could not
// restore.
func (r *REST) checkRestore(ctx context.Context, obj runtime.Object) error {
	db, ok := obj.(*example.Database)
	if !ok || db.Spec.Restore == nil || db.Spec.Restore.Database == "" {
		return nil
	}
	restore := field.NewPath("spec", "restore")
	var first *metav1.Time
	if r.SourceBackups != nil && db.Spec.Backup != nil {
		if from, err := r.SourceBackups(ctx, db); err == nil {
			if len(from) == 0 {
				return errors.NewInvalid(example.Kind("Database"), db.Name, field.ErrorList{field.Invalid(
					restore.Child("database"), db.Spec.Restore.Database, fmt.Sprintf(
						"the store spec.backup names (bucket %s at %s) holds no backup of Database %q in this namespace",
						db.Spec.Backup.S3.Bucket, db.Spec.Backup.S3.Endpoint, db.Spec.Restore.Database))})
			}
			first = &metav1.Time{Time: from[0]}
		}
	}
	if first == nil {
		if got, err := r.Store.Get(ctx, db.Spec.Restore.Database, &metav1.GetOptions{}); err == nil {
			if source, ok := got.(*example.Database); ok && source.Status.Backup != nil {
				first = source.Status.Backup.FirstRecoverableTime
			}
		}
	}
	if errs := validation.ValidateRestoreWindow(&db.Spec, first, r.now(), restore); len(errs) > 0 {
		return errors.NewInvalid(example.Kind("Database"), db.Name, errs)
	}
	return nil
}

// maxWatchTimeoutSeconds is the longest timeoutSeconds a watch takes: the handler turns it
// into a time.Duration (nanoseconds in an int64), which a larger value overflows to a
// negative duration.
const maxWatchTimeoutSeconds = math.MaxInt64 / int64(time.Second)

// Watch is the generic store's Watch, after the check of the watch options that
// k8s.io/apiserver's handler leaves out: a timeoutSeconds that is negative, or above
// maxWatchTimeoutSeconds, is a 422 Invalid ListOptions.meta.k8s.io naming the field, the
// answer the handler gives the options it validates, before any stream starts. Unchecked,
// the watch would start with its deadline passed and end at once, at times with an
// in-stream 500 "context deadline exceeded".
func (r *REST) Watch(ctx context.Context, options *internalversion.ListOptions) (watch.Interface, error) {
	if options != nil && options.TimeoutSeconds != nil {
		path := field.NewPath("timeoutSeconds")
		errs := apivalidation.ValidateNonnegativeField(*options.TimeoutSeconds, path)
		if *options.TimeoutSeconds > maxWatchTimeoutSeconds {
			errs = append(errs, field.Invalid(path, *options.TimeoutSeconds, fmt.Sprintf("must be at most %d", maxWatchTimeoutSeconds)))
		}
		if len(errs) > 0 {
			return nil, errors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
		}
	}
	return r.Store.Watch(ctx, options)
}

// Delete deletes the named Database unless its spec.deletionPolicy is
// DoNotTerminate, in which case it returns a 403 Forbidden that says how to
// allow the deletion. Otherwise it is the generic store's Delete.
func (r *REST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	return r.Store.Delete(ctx, name, refuseDoNotTerminate(deleteValidation), options)
}

// DeleteCollectionPageSize is the number of Databases DeleteCollection lists
// at a time when the request sets no limit: client-go's pager default, so no
// single read holds a whole large collection in memory.
const DeleteCollectionPageSize = 500

// DeleteCollection deletes the selected Databases as the generic store's
// DeleteCollection does: it lists them a page at a time (listOptions.Limit, or
// DeleteCollectionPageSize when unset; a request that sets a limit deletes
// that one page only) and hands each item to DeleteCollectionWorkers
// goroutines, each of which deletes it through Delete with its own copy of
// options. It returns the list of every Database selected.
//
// Databases whose spec.deletionPolicy is DoNotTerminate in the list are
// skipped, so that the others are still deleted (the generic store stops at
// its first refused item, and a namespace deletion would keep every Database
// listed after a protected one); when any was skipped, it returns a 403
// Forbidden that names them and says how to allow their deletion. Any other
// error stops it and is returned, as the generic store does; so is a Database
// made DoNotTerminate after the list, which Delete refuses. A Database deleted
// meanwhile by someone else is not an error.
func (r *REST) DeleteCollection(ctx context.Context, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions, listOptions *internalversion.ListOptions) (runtime.Object, error) {
	if listOptions == nil {
		listOptions = &internalversion.ListOptions{}
	} else {
		listOptions = listOptions.DeepCopy()
	}
	onePage := listOptions.Limit > 0
	if !onePage {
		listOptions.Limit = DeleteCollectionPageSize
	}

	g, gctx := errgroup.WithContext(ctx)
	toDelete := make(chan string, 2*max(r.DeleteCollectionWorkers, 1))
	for range max(r.DeleteCollectionWorkers, 1) {
		g.Go(func() error {
			for name := range toDelete {
				if _, _, err := r.Delete(gctx, name, deleteValidation, options.DeepCopy()); err != nil && !errors.IsNotFound(err) {
					return err
				}
			}
			return nil
		})
	}

	var (
		all     example.DatabaseList
		refused []string
	)
	g.Go(func() error {
		defer close(toDelete)
		for first := true; ; first = false {
			listObj, err := r.Store.List(gctx, listOptions)
			if err != nil {
				return err
			}
			page, ok := listObj.(*example.DatabaseList)
			if !ok {
				return fmt.Errorf("unexpected list type %T", listObj)
			}
			if first {
				all.ListMeta = page.ListMeta
			}
			all.Items = append(all.Items, page.Items...)
			for i := range page.Items {
				db := &page.Items[i]
				if db.Spec.DeletionPolicy == example.DeletionPolicyDoNotTerminate {
					refused = append(refused, db.Name)
					continue
				}
				select {
				case toDelete <- db.Name:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			if onePage || page.Continue == "" {
				all.Continue, all.RemainingItemCount = page.Continue, page.RemainingItemCount
				return nil
			}
			listOptions.Continue = page.Continue
			listOptions.ResourceVersion, listOptions.ResourceVersionMatch = "", ""
		}
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}

	if len(refused) > 0 {
		return nil, errors.NewForbidden(example.Resource("databases"), "", fmt.Errorf(
			"not deleted, spec.deletionPolicy is %s: %s (set it to %s or %s to allow deleting them); the others were deleted",
			example.DeletionPolicyDoNotTerminate, strings.Join(refused, ", "),
			example.DeletionPolicyRetain, example.DeletionPolicyDelete))
	}
	return &all, nil
}

// refuseDoNotTerminate wraps the delete validation (admission) so that it
// runs on the stored object only after the DoNotTerminate check passed. The
// store calls it on the current object of every delete, including each item
// of a delete collection and each retry after a conflict.
func refuseDoNotTerminate(next rest.ValidateObjectFunc) rest.ValidateObjectFunc {
	return func(ctx context.Context, obj runtime.Object) error {
		if db, ok := obj.(*example.Database); ok && db.Spec.DeletionPolicy == example.DeletionPolicyDoNotTerminate {
			return errors.NewForbidden(example.Resource("databases"), db.Name, fmt.Errorf(
				"spec.deletionPolicy is %s: set it to %s or %s to allow deleting this Database",
				example.DeletionPolicyDoNotTerminate, example.DeletionPolicyRetain, example.DeletionPolicyDelete))
		}
		if next == nil {
			return nil
		}
		return next(ctx, obj)
	}
}

// StatusREST serves databases/status: get, update and patch of status only;
// spec and labels in a status write are ignored (database.StatusStrategy).
type StatusREST struct {
	store *genericregistry.Store
}

var (
	_ rest.Patcher             = &StatusREST{}
	_ rest.ResetFieldsStrategy = &StatusREST{}
	_ rest.TableConvertor      = &StatusREST{}
)

// New returns an empty *example.Database.
func (r *StatusREST) New() runtime.Object {
	return &example.Database{}
}

// Destroy does nothing: the underlying store is shared with REST, which destroys it.
func (r *StatusREST) Destroy() {}

// Get returns the Database name, for patches of status; NotFound if there is none.
func (r *StatusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

// Update writes the status of the Database name and returns the stored
// Database. It never creates one (forceAllowCreate is ignored: a subresource
// of a missing Database is NotFound). Errors: NotFound, Conflict on a stale
// resourceVersion, Invalid from database.StatusStrategy's validation.
func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

// GetResetFields returns the fields a status write resets: spec and metadata.labels.
func (r *StatusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

// ConvertToTable prints the Database like the main resource.
func (r *StatusREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

// replicasPaths maps each group/version a Database is served in to the path
// of its replicas field, so server-side apply ownership of spec.replicas
// moves between the Database and its Scale.
var replicasPaths = managedfields.ResourcePathMappings{
	examplev1.SchemeGroupVersion.String(): fieldpath.MakePathOrDie("spec", "replicas"),
}

// ScaleREST serves databases/scale as an autoscaling/v1 Scale whose
// spec.replicas is the Database's spec.replicas and whose status.replicas is
// its status.readyReplicas (as a CRD's scale subresource with those
// specReplicasPath and statusReplicasPath would), for `kubectl scale` and
// HorizontalPodAutoscalers.
type ScaleREST struct {
	store *genericregistry.Store
}

var (
	_ rest.Patcher                  = &ScaleREST{}
	_ rest.GroupVersionKindProvider = &ScaleREST{}
	_ rest.TableConvertor           = &ScaleREST{}
)

// GroupVersionKind returns autoscaling/v1 Scale, whatever the version of the
// Database: the kind the scale subresource is served as.
func (r *ScaleREST) GroupVersionKind(containingGV schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

// New returns an empty internal *scalescheme.Scale.
func (r *ScaleREST) New() runtime.Object {
	return &scalescheme.Scale{}
}

// Destroy does nothing: the underlying store is shared with REST, which destroys it.
func (r *ScaleREST) Destroy() {}

// Get returns the Scale of the Database name (scaleFromDatabase). Errors:
// NotFound, or BadRequest if the Database's status.selector does not parse.
func (r *ScaleREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.store.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	return scaleFromDatabase(obj.(*example.Database))
}

// Update sets spec.replicas of the Database name from the Scale objInfo
// gives, and returns the Database's new Scale. The write goes through the
// main store and strategy, so it bumps metadata.generation and a replica count
// out of 1..10, negative ones included, is a 422 Invalid on the Database's
// spec.replicas, and a scale-down to or below the ordinal of the Pod
// spec.primary names is a 422 Invalid on spec.primary (move the primary
// first), the same errors a write of the Database gets; a Scale resourceVersion or uid other
// than the Database's is a 409 Conflict; a missing Database is a 404.
// Admission sees Scales, not Databases. It never creates a Database.
func (r *ScaleREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	obj, _, err := r.store.Update(
		ctx,
		name,
		&scaleUpdatedObjectInfo{name: name, reqObjInfo: objInfo},
		toScaleCreateValidation(createValidation),
		toScaleUpdateValidation(updateValidation),
		false,
		options,
	)
	if err != nil {
		return nil, false, err
	}
	scale, err := scaleFromDatabase(obj.(*example.Database))
	if err != nil {
		return nil, false, err
	}
	return scale, false, nil
}

// ConvertToTable prints a Scale with the generic Name / Created At columns.
func (r *ScaleREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}

// toScaleCreateValidation adapts an admission check of Scales to the
// Databases the store validates. A nil f stays nil (no check).
func toScaleCreateValidation(f rest.ValidateObjectFunc) rest.ValidateObjectFunc {
	if f == nil {
		return nil
	}
	return func(ctx context.Context, obj runtime.Object) error {
		scale, err := scaleFromDatabase(obj.(*example.Database))
		if err != nil {
			return err
		}
		return f(ctx, scale)
	}
}

// toScaleUpdateValidation adapts an admission check of Scale updates to the
// Databases the store validates. A nil f stays nil (no check).
func toScaleUpdateValidation(f rest.ValidateObjectUpdateFunc) rest.ValidateObjectUpdateFunc {
	if f == nil {
		return nil
	}
	return func(ctx context.Context, obj, old runtime.Object) error {
		newScale, err := scaleFromDatabase(obj.(*example.Database))
		if err != nil {
			return err
		}
		oldScale, err := scaleFromDatabase(old.(*example.Database))
		if err != nil {
			return err
		}
		return f(ctx, newScale, oldScale)
	}
}

// scaleFromDatabase returns the Scale of db: spec.replicas from
// db.spec.replicas (0 when not set, which DatabaseDefaults prevents),
// status.replicas from status.readyReplicas, status.selector parsed from
// status.selector (nil when empty), and the name, namespace, uid,
// resourceVersion and creationTimestamp of db. It returns a BadRequest if
// status.selector is not a label selector.
func scaleFromDatabase(db *example.Database) (*scalescheme.Scale, error) {
	var selector *metav1.LabelSelector
	if db.Status.Selector != "" {
		var err error
		selector, err = metav1.ParseToLabelSelector(db.Status.Selector)
		if err != nil {
			return nil, errors.NewBadRequest(fmt.Sprintf("Database %s/%s has an invalid status.selector: %v", db.Namespace, db.Name, err))
		}
	}
	var replicas int32
	if db.Spec.Replicas != nil {
		replicas = *db.Spec.Replicas
	}
	return &scalescheme.Scale{
		ObjectMeta: metav1.ObjectMeta{
			Name:              db.Name,
			Namespace:         db.Namespace,
			UID:               db.UID,
			ResourceVersion:   db.ResourceVersion,
			CreationTimestamp: db.CreationTimestamp,
		},
		Spec: scalescheme.ScaleSpec{Replicas: replicas},
		Status: scalescheme.ScaleStatus{
			Replicas: db.Status.ReadyReplicas,
			Selector: selector,
		},
	}, nil
}

// scaleUpdatedObjectInfo turns the stored Database into the updated one: it
// shows the request the Database's current Scale, and copies the new Scale's
// replicas, resourceVersion and managed fields back into the Database.
type scaleUpdatedObjectInfo struct {
	name       string
	reqObjInfo rest.UpdatedObjectInfo
}

// Preconditions returns the request's preconditions (uid, resourceVersion).
func (i *scaleUpdatedObjectInfo) Preconditions() *metav1.Preconditions {
	return i.reqObjInfo.Preconditions()
}

// UpdatedObject returns a copy of the stored Database oldObj with the new
// Scale applied. The Scale's resourceVersion becomes the Database's, so the
// store refuses a stale one with a Conflict; an empty one updates
// unconditionally.
func (i *scaleUpdatedObjectInfo) UpdatedObject(ctx context.Context, oldObj runtime.Object) (runtime.Object, error) {
	db, ok := oldObj.DeepCopyObject().(*example.Database)
	if !ok {
		return nil, errors.NewBadRequest(fmt.Sprintf("expected the stored object to be a Database, got %T", oldObj))
	}
	// The store hands a zero Database when none is stored.
	if db.ResourceVersion == "" {
		return nil, errors.NewNotFound(example.Resource("databases/scale"), i.name)
	}

	managedFieldsHandler := managedfields.NewScaleHandler(db.ManagedFields, requestGroupVersion(ctx), replicasPaths)

	oldScale, err := scaleFromDatabase(db)
	if err != nil {
		return nil, err
	}
	oldScale.ManagedFields, err = managedFieldsHandler.ToSubresource()
	if err != nil {
		return nil, err
	}

	newObj, err := i.reqObjInfo.UpdatedObject(ctx, oldScale)
	if err != nil {
		return nil, err
	}
	if newObj == nil {
		return nil, errors.NewBadRequest("nil update passed to Scale")
	}
	scale, ok := newObj.(*scalescheme.Scale)
	if !ok {
		return nil, errors.NewBadRequest(fmt.Sprintf("expected input object type to be Scale, but %T", newObj))
	}

	// resourceVersion is checked by the store; uid is ours to check.
	if scale.UID != "" && scale.UID != db.UID {
		return nil, errors.NewConflict(
			example.Resource("databases/scale"),
			db.Name,
			fmt.Errorf("precondition failed: uid in precondition: %v, uid in object meta: %v", scale.UID, db.UID),
		)
	}

	replicas := scale.Spec.Replicas
	db.Spec.Replicas = &replicas
	db.ResourceVersion = scale.ResourceVersion

	db.ManagedFields, err = managedFieldsHandler.ToParent(scale.ManagedFields)
	if err != nil {
		return nil, err
	}
	return db, nil
}

// requestGroupVersion returns the group/version of the Database the request
// addresses, example.com/v1 when the context does not say or names a
// version without a replicas path.
func requestGroupVersion(ctx context.Context) schema.GroupVersion {
	if info, ok := genericapirequest.RequestInfoFrom(ctx); ok {
		gv := schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}
		if _, known := replicasPaths[gv.String()]; known {
			return gv
		}
	}
	return examplev1.SchemeGroupVersion
}
