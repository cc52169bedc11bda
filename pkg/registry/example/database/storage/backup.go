package storage

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// BackupREST serves POST databases/{name}/backup (the create verb on the subresource, as
// databases/restart): the body is a DatabaseBackupRequest, the answer the Database with the
// request recorded in status.backup.request, for which the controller starts a backup Job.
type BackupREST struct {
	store *genericregistry.Store
	now   func() time.Time
}

var (
	_ rest.NamedCreater    = &BackupREST{}
	_ rest.StorageMetadata = &BackupREST{}
)

// New returns an empty *example.DatabaseBackupRequest, the body's kind.
func (r *BackupREST) New() runtime.Object { return &example.DatabaseBackupRequest{} }

// Destroy does nothing: the underlying store is shared with REST, which destroys it.
func (r *BackupREST) Destroy() {}

// ProducesMIMETypes returns nil: the usual types.
func (r *BackupREST) ProducesMIMETypes(verb string) []string { return nil }

// ProducesObject returns a Database: the answer's kind, for OpenAPI.
func (r *BackupREST) ProducesObject(verb string) interface{} { return examplev1.Database{} }

// Create records a backup of the Database name, asked for by the request's user, and
// returns the Database. Errors: BadRequest for a body that is not a DatabaseBackupRequest or
// names another Database; NotFound; Conflict when the Database has no spec.backup, is being
// deleted or is Failed, while a backup Job runs (status.backup.activeJob), or while a backup
// asked for is not started yet (status.backup.request newer than lastScheduleTime); what
// createValidation (validating admission) returns. A refused request changes nothing; a dry
// run changes nothing either.
func (r *BackupREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	req, ok := obj.(*example.DatabaseBackupRequest)
	if !ok {
		return nil, errors.NewBadRequest(fmt.Sprintf("the body of databases/backup must be a DatabaseBackupRequest, got %T", obj))
	}
	if err := checkRequestName(name, req.Name, "DatabaseBackupRequest"); err != nil {
		return nil, err
	}
	if createValidation != nil {
		if err := createValidation(ctx, req.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	record := &example.DatabaseBackupRequestStatus{
		RequestedBy: requestUser(ctx),
		RequestedAt: metav1.NewTime(r.now().Truncate(time.Second)),
	}
	resource := example.Resource("databases")
	return updateRequested(ctx, r.store, name, options, func(_, db *example.Database) (*example.Database, error) {
		conflict := func(format string, args ...any) error {
			return errors.NewConflict(resource, name, fmt.Errorf(format, args...))
		}
		switch b := db.Status.Backup; {
		case db.DeletionTimestamp != nil:
			return nil, conflict("the Database is being deleted")
		case db.Spec.Backup == nil:
			return nil, conflict("the Database has no spec.backup: set it, with the store to back up to, first")
		case b != nil && b.ActiveJob != "":
			return nil, conflict("a backup is running: Job %s; ask again once it ends (status.backup.activeJob)", b.ActiveJob)
		case b != nil && b.Request != nil && (b.LastScheduleTime == nil || b.LastScheduleTime.Before(&b.Request.RequestedAt)):
			return nil, conflict("a backup requested by %s at %s is not started yet (it starts once the Database is Ready)",
				b.Request.RequestedBy, b.Request.RequestedAt.UTC().Format(time.RFC3339))
		}
		if err := failed(db); err != nil {
			return nil, err
		}
		if db.Status.Backup == nil {
			db.Status.Backup = &example.DatabaseBackupStatus{}
		}
		// status.backup.request is the server's record of the request, no field the
		// requester sets: it takes no field ownership.
		db.Status.Backup.Request = record
		return db, nil
	})
}
