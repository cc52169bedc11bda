package storage

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"

	// The API server serves every engine of the repository.
	_ "example.com/database-apiserver/pkg/engine/engines"
)

// ConnectionREST serves GET databases/{name}/connection: the
// DatabaseConnection of the Database, computed on each read (Connection,
// the facts the controller writes into the credentials Secret, its hosts under
// clusterDomain) and never stored.
type ConnectionREST struct {
	store         *genericregistry.Store
	scheme        *runtime.Scheme
	clusterDomain string
}

var _ rest.Getter = &ConnectionREST{}

// New returns an empty *example.DatabaseConnection.
func (r *ConnectionREST) New() runtime.Object {
	return &example.DatabaseConnection{}
}

// Destroy does nothing: the underlying store is shared with REST, which destroys it.
func (r *ConnectionREST) Destroy() {}

// Get returns the DatabaseConnection of the Database name; NotFound if there
// is none, BadRequest for a Database whose engine the controller has no
// recipe for (validation refuses such a Database).
func (r *ConnectionREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.store.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	db := obj.(*example.Database)
	var v1db examplev1.Database
	if err := r.scheme.Convert(db, &v1db, nil); err != nil {
		return nil, err
	}
	recipe, ok := engine.For(v1db.Spec.Engine)
	if !ok {
		return nil, errors.NewBadRequest(fmt.Sprintf("Database %s/%s has engine %q, which the controller does not run", db.Namespace, db.Name, db.Spec.Engine))
	}
	var replicas int32 = 1
	if v1db.Spec.Replicas != nil {
		replicas = *v1db.Spec.Replicas
	}
	v1conn := Connection(&v1db, recipe, replicas, r.clusterDomain)
	conn := &example.DatabaseConnection{}
	if err := r.scheme.Convert(v1conn, conn, nil); err != nil {
		return nil, err
	}
	return conn, nil
}

// MaxRestartReasonLength is the longest DatabaseRestart reason, in bytes: the
// message length of a metav1.Condition, since the reason is shown in the Database's
// status and Events.
const MaxRestartReasonLength = 32768

// validateRestart returns the field errors of req: its reason is at most
// MaxRestartReasonLength bytes of printable UTF-8, each character one unicode.IsPrint
// accepts (letters, marks, numbers, punctuation, symbols and the ASCII space): no control
// characters (newlines, tabs, terminal escape sequences) nor other spacing or format
// characters (bidirectional overrides), so a reason shown in a terminal (kubectl database
// describe, Events) cannot fake lines or rewrite what is on screen. The error names the
// first character refused and its byte offset, without echoing the reason.
func validateRestart(req *example.DatabaseRestart) field.ErrorList {
	path := field.NewPath("reason")
	if len(req.Reason) > MaxRestartReasonLength {
		return field.ErrorList{field.TooLong(path, "", MaxRestartReasonLength)}
	}
	for i, r := range req.Reason {
		var what string
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(req.Reason[i:], string(utf8.RuneError)):
			what = fmt.Sprintf("invalid UTF-8 (byte 0x%02x)", req.Reason[i])
		case !unicode.IsPrint(r):
			what = fmt.Sprintf("%U", r)
		default:
			continue
		}
		return field.ErrorList{field.Invalid(path, field.OmitValueType{}, fmt.Sprintf(
			"must be printable UTF-8 without control characters (newlines, tabs, escape sequences): %s at byte %d", what, i))}
	}
	return nil
}

// RestartREST serves POST databases/{name}/restart (the create verb on the
// subresource, as pods/eviction): the body is a DatabaseRestart, the answer
// the Database with the request recorded in status.restart, which the
// controller carries out.
type RestartREST struct {
	store *genericregistry.Store
	now   func() time.Time
}

var (
	_ rest.NamedCreater    = &RestartREST{}
	_ rest.StorageMetadata = &RestartREST{}
)

// New returns an empty *example.DatabaseRestart, the body's kind.
func (r *RestartREST) New() runtime.Object {
	return &example.DatabaseRestart{}
}

// Destroy does nothing: the underlying store is shared with REST, which destroys it.
func (r *RestartREST) Destroy() {}

// ProducesMIMETypes returns nil: the usual types.
func (r *RestartREST) ProducesMIMETypes(verb string) []string { return nil }

// ProducesObject returns a Database: the answer's kind, for OpenAPI.
func (r *RestartREST) ProducesObject(verb string) interface{} { return examplev1.Database{} }

// Create records a restart of the Database name, asked for by the request's
// user, and returns the Database. Errors: BadRequest for a body that is not a
// DatabaseRestart or names another Database; Invalid for a reason longer than
// MaxRestartReasonLength or not printable (validateRestart); NotFound; Conflict while a restart is under way
// (status.restart has no completedAt), while a switchover is (spec.primary is
// not status.primary), when the Database is Failed or being deleted; what
// createValidation (validating admission) returns. A refused request changes
// nothing; a dry run changes nothing either.
func (r *RestartREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	req, ok := obj.(*example.DatabaseRestart)
	if !ok {
		return nil, errors.NewBadRequest(fmt.Sprintf("the body of databases/restart must be a DatabaseRestart, got %T", obj))
	}
	if err := checkRequestName(name, req.Name, "DatabaseRestart"); err != nil {
		return nil, err
	}
	if errs := validateRestart(req); len(errs) > 0 {
		return nil, errors.NewInvalid(example.Kind("DatabaseRestart"), name, errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, req.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	record := &example.DatabaseRestartStatus{
		RequestedBy: requestUser(ctx),
		RequestedAt: metav1.NewMicroTime(r.now().Truncate(time.Microsecond)),
		Reason:      req.Reason,
	}
	resource := example.Resource("databases")
	return updateRequested(ctx, r.store, name, options, func(_, db *example.Database) (*example.Database, error) {
		if db.DeletionTimestamp != nil {
			return nil, errors.NewConflict(resource, name, fmt.Errorf("the Database is being deleted"))
		}
		if err := restartUnderWay(db); err != nil {
			return nil, err
		}
		if requested := example.RequestedPrimary(db); requested != "" && requested != db.Status.Primary {
			// The controller restarts no Pod while a switchover moves the primary.
			return nil, errors.NewConflict(resource, name, fmt.Errorf("a switchover to %s is under way (spec.primary; status.primary is %q); ask again once it is done",
				requested, db.Status.Primary))
		}
		if err := failed(db); err != nil {
			return nil, err
		}
		// status.restart is the server's record of the request, no field the requester
		// sets: a restart takes no field ownership (managedFields are unchanged).
		db.Status.Restart = record
		return db, nil
	})
}

// restartUnderWay returns a Conflict naming the restart of db under way (status.restart
// has no completedAt), nil when there is none: neither a second restart nor a switchover
// is asked for meanwhile (the controller moves no primary while it rolls the Pods, and
// rolls none while a switchover moves it).
func restartUnderWay(db *example.Database) error {
	cur := db.Status.Restart
	if cur == nil || cur.CompletedAt != nil {
		return nil
	}
	return errors.NewConflict(example.Resource("databases"), db.Name, fmt.Errorf("a restart is under way: requested by %s at %s; ask again once status.restart.completedAt is set",
		cur.RequestedBy, cur.RequestedAt.UTC().Format(time.RFC3339)))
}

// failed returns a Conflict when db is Failed, nil otherwise: the controller carries out
// nothing on a Failed Database, so a request would wait, unseen, and run whenever the
// failure is resolved.
func failed(db *example.Database) error {
	if db.Status.Phase != example.DatabasePhaseFailed {
		return nil
	}
	return errors.NewConflict(example.Resource("databases"), db.Name, fmt.Errorf("the Database is Failed (see its Ready condition); resolve that first"))
}

// SwitchoverREST serves POST databases/{name}/switchover: the body is a
// DatabaseSwitchover naming the Pod to become the primary; after checking it
// against status.members, spec.primary is set to it (the controller carries
// out the planned switchover that describes), the request is recorded in
// status.switchover, and the answer is the Database.
type SwitchoverREST struct {
	store *genericregistry.Store
	now   func() time.Time
	// fieldManager records the requester as the owner of spec.primary: an Update of
	// the example.com/v1 Database through the subresource "switchover".
	fieldManager *managedfields.FieldManager
}

var (
	_ rest.NamedCreater    = &SwitchoverREST{}
	_ rest.StorageMetadata = &SwitchoverREST{}
)

// New returns an empty *example.DatabaseSwitchover, the body's kind.
func (r *SwitchoverREST) New() runtime.Object {
	return &example.DatabaseSwitchover{}
}

// Destroy does nothing: the underlying store is shared with REST, which destroys it.
func (r *SwitchoverREST) Destroy() {}

// ProducesMIMETypes returns nil: the usual types.
func (r *SwitchoverREST) ProducesMIMETypes(verb string) []string { return nil }

// ProducesObject returns a Database: the answer's kind, for OpenAPI.
func (r *SwitchoverREST) ProducesObject(verb string) interface{} { return examplev1.Database{} }

// Create asks for a switchover of the Database name to the Pod req.Target and
// returns the updated Database, in whose managedFields the requester owns
// spec.primary (manager options.FieldManager, else the User-Agent's prefix as
// managerOrUserAgent names it; operation Update, subresource "switchover").
// Errors: BadRequest for a body that is not a
// DatabaseSwitchover, names another Database, or a Database whose engine the
// controller does not replicate (engine.Recipe.Replicates);
// Invalid (422) on target when it is empty or not one of the Database's Pods,
// listing those; NotFound; Conflict when the target is already the primary,
// a switchover or a restart is under way, the Database is Failed or being
// deleted, or the target is not a Ready replica that streams from the primary
// within SwitchoverMaxLagBytes (status.members). A refused request changes
// nothing.
func (r *SwitchoverREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	req, ok := obj.(*example.DatabaseSwitchover)
	if !ok {
		return nil, errors.NewBadRequest(fmt.Sprintf("the body of databases/switchover must be a DatabaseSwitchover, got %T", obj))
	}
	if err := checkRequestName(name, req.Name, "DatabaseSwitchover"); err != nil {
		return nil, err
	}
	if createValidation != nil {
		if err := createValidation(ctx, req.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	record := &example.DatabaseSwitchoverStatus{
		RequestedBy: requestUser(ctx),
		RequestedAt: metav1.NewTime(r.now().Truncate(time.Second)),
		Target:      req.Target,
	}
	var fieldManager string
	if options != nil {
		fieldManager = options.FieldManager
	}
	manager := managerOrUserAgent(fieldManager, userAgentFrom(ctx))
	return updateRequested(ctx, r.store, name, options, func(stored, db *example.Database) (*example.Database, error) {
		if err := r.check(db, req); err != nil {
			return nil, err
		}
		record.RequestedAt = example.RequestTime(r.now(), &db.Status)
		db.Spec.Primary = req.Target
		// The requester owns spec.primary from now on, so a server-side apply by its
		// previous owner conflicts instead of silently moving the primary back. As
		// k8s.io/apiserver's handlers do, a failure to track ownership keeps the stored
		// managedFields and fails nothing.
		updated, ok := r.fieldManager.UpdateNoErrors(stored, db, manager).(*example.Database)
		if !ok {
			return nil, errors.NewInternalError(fmt.Errorf("the field manager of databases/switchover returned no Database"))
		}
		// status.switchover is the server's record of the request, no field the
		// requester sets: it is written after the ownership is recorded.
		updated.Status.Switchover = record
		return updated, nil
	})
}

// SwitchoverMaxLagBytes is how far behind its primary, in bytes of WAL, a replica may be and
// still be the target of a switchover: one WAL segment at PostgreSQL's default
// wal_segment_size, 16 MiB. A target that streams from the primary is caught up enough: the
// controller promotes it only once it holds everything the old primary wrote, so no
// committed transaction is lost; the bound refuses one that would keep the Database without
// a primary for long. An engine that reports no lag in bytes (MySQL) is not bound by it.
const SwitchoverMaxLagBytes = 16 << 20

// check returns why the switchover req of db is refused, nil when it is not.
func (r *SwitchoverREST) check(db *example.Database, req *example.DatabaseSwitchover) error {
	resource := example.Resource("databases")
	if db.DeletionTimestamp != nil {
		return errors.NewConflict(resource, db.Name, fmt.Errorf("the Database is being deleted"))
	}
	recipe, ok := engine.For(examplev1.Engine(db.Spec.Engine))
	if !ok || !recipe.Replicates() {
		return errors.NewBadRequest(fmt.Sprintf("Database %s runs %s, whose Pods the controller does not replicate: there is no replica to switch over to", db.Name, db.Spec.Engine))
	}
	var replicas int32 = 1
	if db.Spec.Replicas != nil {
		replicas = *db.Spec.Replicas
	}
	pods := make([]string, 0, replicas)
	for i := range replicas {
		pods = append(pods, example.PodName(db.Name, i))
	}
	targetPath := field.NewPath("target")
	if req.Target == "" {
		return errors.NewInvalid(example.Kind("DatabaseSwitchover"), db.Name, field.ErrorList{field.Required(targetPath, "the Pod to become the primary, one of: "+strings.Join(pods, ", "))})
	}
	if ordinal, ok := example.PodOrdinal(db.Name, req.Target); !ok || ordinal >= replicas {
		return errors.NewInvalid(example.Kind("DatabaseSwitchover"), db.Name, field.ErrorList{field.NotSupported(targetPath, req.Target, pods)})
	}
	primary := db.Status.Primary
	if requested := example.RequestedPrimary(db); requested != "" && requested != primary {
		return errors.NewConflict(resource, db.Name, fmt.Errorf("a switchover to %s is under way (spec.primary); status.primary is %q", requested, primary))
	}
	if f := db.Status.Failover; f != nil && f.Phase == example.FailoverPhasePromoting {
		return errors.NewConflict(resource, db.Name, fmt.Errorf("a failover from %s to %s is under way (status.failover); ask again once it is done", f.From, f.To))
	}
	if t := db.Status.PrimaryLastWritableTime; t != nil {
		// A switchover stops the primary once its target streams from it: one that takes
		// no writes is failed over (spec.failover Automatic) or waited for (Manual).
		return errors.NewConflict(resource, db.Name, fmt.Errorf("the primary %s has taken no writes since %s (status.primaryLastWritableTime): a switchover needs it to answer; a failover replaces it (spec.failover Automatic)",
			primary, t.UTC().Format(time.RFC3339)))
	}
	if err := restartUnderWay(db); err != nil {
		return err
	}
	if err := failed(db); err != nil {
		return err
	}
	if req.Target == primary {
		return errors.NewConflict(resource, db.Name, fmt.Errorf("%s is already the primary", req.Target))
	}
	var member *example.DatabaseMember
	for i := range db.Status.Members {
		if db.Status.Members[i].Name == req.Target {
			member = &db.Status.Members[i]
		}
	}
	var reason string
	switch {
	case primary == "":
		reason = "the controller has not confirmed a primary yet (status.primary is empty)"
	case member == nil:
		reason = fmt.Sprintf("%s is not in status.members yet", req.Target)
	case !member.Ready:
		reason = fmt.Sprintf("%s is not Ready", req.Target)
	case member.Role != example.MemberRoleReplica:
		reason = fmt.Sprintf("%s is not a replica (role %q)", req.Target, member.Role)
	case !member.Streaming:
		reason = fmt.Sprintf("%s does not stream from the primary %s", req.Target, primary)
	case member.LagBytes != nil && *member.LagBytes > SwitchoverMaxLagBytes:
		reason = fmt.Sprintf("%s is %d bytes of WAL behind the primary %s (at most %d)", req.Target, *member.LagBytes, primary, SwitchoverMaxLagBytes)
	}
	if reason != "" {
		return errors.NewConflict(resource, db.Name, fmt.Errorf("%s is not a caught-up replica: %s", req.Target, reason))
	}
	return nil
}

// checkRequestName returns a BadRequest when the body's metadata.name is set
// and is not the Database's name from the URL.
func checkRequestName(name, bodyName, kind string) error {
	if bodyName != "" && bodyName != name {
		return errors.NewBadRequest(fmt.Sprintf("metadata.name of the %s, %q, does not match the Database %q in the URL", kind, bodyName, name))
	}
	return nil
}

// requestUser returns the authenticated user name of the request, "" when
// the context carries none.
func requestUser(ctx context.Context) string {
	if u, ok := genericapirequest.UserFrom(ctx); ok {
		return u.GetName()
	}
	return ""
}

// updateRequested updates the Database name through store (a RequestStrategy
// store): mutate gets the stored Database, which it must not change, and a
// copy of it, and returns the Database with what the request sets, or why it
// is refused, in which case nothing is written. The update is conditional on the stored resourceVersion and is a
// dry run when options say so. It never creates a Database.
func updateRequested(ctx context.Context, store *genericregistry.Store, name string, options *metav1.CreateOptions, mutate func(stored, db *example.Database) (*example.Database, error)) (runtime.Object, error) {
	var updateOptions metav1.UpdateOptions
	if options != nil {
		updateOptions.DryRun = options.DryRun
	}
	objInfo := rest.DefaultUpdatedObjectInfo(nil, func(ctx context.Context, _, oldObj runtime.Object) (runtime.Object, error) {
		stored, ok := oldObj.(*example.Database)
		if !ok {
			return nil, errors.NewInternalError(fmt.Errorf("expected the stored object to be a Database, got %T", oldObj))
		}
		// The store hands a zero Database when none is stored.
		if accessor, err := meta.Accessor(stored); err != nil || accessor.GetResourceVersion() == "" {
			return nil, errors.NewNotFound(example.Resource("databases"), name)
		}
		db, err := mutate(stored, stored.DeepCopy())
		if err != nil {
			return nil, err
		}
		return db, nil
	})
	obj, _, err := store.Update(ctx, name, objInfo, rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &updateOptions)
	return obj, err
}
