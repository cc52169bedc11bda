// Package database holds the registry rules of the databases resource: how a
// Database is prepared and validated on create, update and status update, which
// fields the two halves reset for server-side apply, which fields can be
// selected on, and how Databases print as a table.
package database

import (
	"context"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/apis/example/validation"
)

// Strategy is the create, update and delete logic of the databases resource:
// users own spec and metadata, the controller owns status (written through
// databases/status, see StatusStrategy). Its methods expect *example.Database
// and panic on any other type, as the generic store only hands them Databases.
type Strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

var (
	_ rest.RESTCreateUpdateStrategy = Strategy{}
	_ rest.RESTDeleteStrategy       = Strategy{}
	_ rest.ResetFieldsStrategy      = Strategy{}
	_ rest.RESTUpdateStrategy       = StatusStrategy{}
	_ rest.ResetFieldsStrategy      = StatusStrategy{}
	_ rest.RESTUpdateStrategy       = RequestStrategy{}
)

// NewStrategy returns the Strategy of databases; typer is normally the
// server's scheme, with example.com installed. Generated names use
// names.SimpleNameGenerator (generateName plus 5 random characters).
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator}
}

// NamespaceScoped returns true: Databases live in a namespace.
func (Strategy) NamespaceScoped() bool {
	return true
}

// GetResetFields returns the fields the main resource never writes: status,
// which only databases/status may change. Server-side apply drops them from
// managed fields so the user and the controller do not fight over them.
func (Strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(examplev1.SchemeGroupVersion.String()): fieldpath.NewSet(
			fieldpath.MakePathOrDie("status"),
		),
	}
}

// PrepareForCreate clears status, which users may not set, and a
// metadata.resourceVersion copied from another object (storage assigns it),
// sets metadata.generation to 1, and writes spec.storage canonically.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	db := obj.(*example.Database)
	db.Status = example.DatabaseStatus{}
	db.ResourceVersion = ""
	db.Generation = 1
	db.Spec.Storage = example.CanonicalStorage(db.Spec.Storage)
}

// PrepareForUpdate keeps the stored status, writes spec.storage canonically
// (so "0100Gi" for "100Gi" is no change), and bumps metadata.generation by
// one when the spec changed (labels, annotations or finalizers alone do not),
// so status.observedGeneration tells the controller's progress on the spec.
// A write that changes spec.primary to a Pod is a request to move the
// primary, recorded in status.switchover as databases/switchover records its
// own (who, when to the second (example.RequestTime), which Pod): the
// controller acts on a spec.primary asked since the last failover only
// (example.RequestedPrimary).
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	newDB := obj.(*example.Database)
	oldDB := old.(*example.Database)
	newDB.Status = oldDB.Status
	newDB.Spec.Storage = example.CanonicalStorage(newDB.Spec.Storage)
	if !apiequality.Semantic.DeepEqual(newDB.Spec, oldDB.Spec) {
		newDB.Generation = oldDB.Generation + 1
	}
	if newDB.Spec.Primary != "" && newDB.Spec.Primary != oldDB.Spec.Primary {
		var by string
		if u, ok := genericapirequest.UserFrom(ctx); ok {
			by = u.GetName()
		}
		newDB.Status.Switchover = &example.DatabaseSwitchoverStatus{
			RequestedBy: by, RequestedAt: example.RequestTime(time.Now(), &oldDB.Status), Target: newDB.Spec.Primary,
		}
	}
}

// Validate returns the field errors of a new Database (validation.ValidateDatabase);
// the store turns them into a 422 Invalid.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateDatabase(obj.(*example.Database))
}

// WarningsOnCreate returns validation.ReplicaWarnings of the new Database. Version
// end-of-life warnings come from the DatabaseValidation admission plugin.
func (Strategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string {
	return validation.ReplicaWarnings(&obj.(*example.Database).Spec, nil)
}

// Canonicalize does nothing: a Database has no order-insensitive fields to normalize.
func (Strategy) Canonicalize(obj runtime.Object) {}

// AllowCreateOnUpdate returns false: a PUT to a missing Database is a 404, not a create.
func (Strategy) AllowCreateOnUpdate(ctx context.Context) bool {
	return false
}

// ValidateUpdate returns the field errors of an update
// (validation.ValidateDatabaseUpdate: also engine immutability and no
// storage shrink); the store turns them into a 422 Invalid.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateDatabaseUpdate(obj.(*example.Database), old.(*example.Database))
}

// WarningsOnUpdate returns validation.ReplicaWarnings of the update, which the scale
// subresource's writes go through too.
func (Strategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return validation.ReplicaWarnings(&obj.(*example.Database).Spec, &old.(*example.Database).Spec)
}

// AllowUnconditionalUpdate returns true: an update without
// metadata.resourceVersion overwrites the latest version (kubectl edit, replace).
func (Strategy) AllowUnconditionalUpdate(ctx context.Context) bool {
	return true
}

// StatusStrategy is the update logic of databases/status: the controller
// owns status there, and spec and labels stay as stored.
type StatusStrategy struct {
	Strategy
}

// NewStatusStrategy returns the StatusStrategy built on strategy.
func NewStatusStrategy(strategy Strategy) StatusStrategy {
	return StatusStrategy{Strategy: strategy}
}

// GetResetFields returns the fields databases/status never writes: spec and
// metadata.labels, as upstream's Deployment status strategy does.
func (StatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(examplev1.SchemeGroupVersion.String()): fieldpath.NewSet(
			fieldpath.MakePathOrDie("spec"),
			fieldpath.MakePathOrDie("metadata", "labels"),
		),
	}
}

// PrepareForUpdate keeps the stored spec and labels, so a status write cannot
// change what the user asked for nor which selectors match the Database, and
// the stored requests of databases/restart and databases/switchover, so a
// status writer cannot forge who asked for one (KeepRequests).
// metadata.generation is not bumped: BeforeUpdate already reset it to the stored one.
func (StatusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	newDB := obj.(*example.Database)
	oldDB := old.(*example.Database)
	newDB.Spec = oldDB.Spec
	newDB.Labels = oldDB.Labels
	KeepRequests(&newDB.Status, &oldDB.Status)
}

// KeepRequests sets the restart, switchover and backup request records of
// status to the stored ones of old. The one thing a status write may add is the
// completion of the stored restart: CompletedAt, when the stored one has
// none and status names the same request (the same RequestedAt), so a
// controller writing from a stale copy never completes a newer request.
func KeepRequests(status, old *example.DatabaseStatus) {
	restart := old.Restart.DeepCopy()
	if restart != nil && restart.CompletedAt == nil && status.Restart != nil &&
		status.Restart.CompletedAt != nil && status.Restart.RequestedAt.Equal(&restart.RequestedAt) {
		restart.CompletedAt = status.Restart.CompletedAt.DeepCopy()
	}
	status.Restart = restart
	status.Switchover = old.Switchover.DeepCopy()
	var request *example.DatabaseBackupRequestStatus
	if old.Backup != nil {
		request = old.Backup.Request.DeepCopy()
	}
	switch {
	case status.Backup != nil:
		status.Backup.Request = request
	case request != nil:
		status.Backup = &example.DatabaseBackupStatus{Request: request}
	}
}

// RequestStrategy is the update logic of databases/restart and
// databases/switchover. Their REST builds the new Database from the stored
// one, changing only what the request sets (status.restart; spec.primary and
// status.switchover), so PrepareForUpdate has nothing to keep; it bumps
// metadata.generation when the spec changed, as Strategy does.
type RequestStrategy struct {
	Strategy
}

// NewRequestStrategy returns the RequestStrategy built on strategy.
func NewRequestStrategy(strategy Strategy) RequestStrategy {
	return RequestStrategy{Strategy: strategy}
}

// PrepareForUpdate bumps metadata.generation by one when the spec changed.
func (RequestStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	newDB := obj.(*example.Database)
	oldDB := old.(*example.Database)
	if !apiequality.Semantic.DeepEqual(newDB.Spec, oldDB.Spec) {
		newDB.Generation = oldDB.Generation + 1
	}
}

// ValidateUpdate returns the field errors of a status update
// (validation.ValidateDatabaseStatusUpdate).
func (StatusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateDatabaseStatusUpdate(obj.(*example.Database), old.(*example.Database))
}

// WarningsOnUpdate returns no warnings: a status writer cannot act on spec warnings.
func (StatusStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

// GetAttrs returns the labels and the selectable fields (SelectableFields) of
// a Database, for label and field selectors on list and watch. It returns an
// error if obj is not a *example.Database.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	db, ok := obj.(*example.Database)
	if !ok {
		return nil, nil, fmt.Errorf("not a Database: %T", obj)
	}
	return labels.Set(db.Labels), SelectableFields(db), nil
}

// SelectableFields returns the field selector values of db: metadata.name,
// metadata.namespace, spec.engine, spec.version and status.phase. The set must
// match the field labels example.com/v1 accepts (v1 field label conversion).
func SelectableFields(db *example.Database) fields.Set {
	objectMetaFields := generic.ObjectMetaFieldsSet(&db.ObjectMeta, true)
	specificFields := fields.Set{
		examplev1.FieldSpecEngine:  string(db.Spec.Engine),
		examplev1.FieldSpecVersion: db.Spec.Version,
		examplev1.FieldStatusPhase: string(db.Status.Phase),
	}
	return generic.MergeFieldsSets(objectMetaFields, specificFields)
}

// MatchDatabase returns the predicate that matches Databases against a label
// and a field selector, reading attributes with GetAttrs.
func MatchDatabase(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{
		Label:    label,
		Field:    field,
		GetAttrs: GetAttrs,
	}
}
