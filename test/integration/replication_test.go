package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	applyv1 "example.com/database-apiserver/pkg/generated/applyconfiguration/example/v1"
)

// The Pod spec.primary names may not be removed by a scale-down, through
// the Database or through databases/scale: a 422 on spec.primary that says to
// move the primary first, and nothing stored.
func TestScaleDownThatWouldRemoveTheNamedPrimaryIsInvalid(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "switched", examplev1.EnginePostgreSQL, "16")
	db.Spec.Replicas = ptrInt32(3)
	db.Spec.Primary = "switched-2"
	db = create(t, client, db)

	scale, err := dbs.GetScale(ctx, "switched", metav1.GetOptions{})
	require.NoError(t, err)
	scale.Spec.Replicas = 2
	_, err = dbs.UpdateScale(ctx, "switched", scale, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	require.ErrorContains(t, err, `spec.primary: Invalid value: "switched-2": spec.replicas may not drop from 3 to 2 while spec.primary names this Pod: name one of`)

	resp := do(t, http.MethodPut, databasesPath(ns)+"/switched/scale",
		[]byte(`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"switched","namespace":"`+ns+`"},"spec":{"replicas":1}}`), nil)
	require.Equal(t, http.StatusUnprocessableEntity, resp.code, "%s", resp.body)
	status := resp.status(t)
	require.NotNil(t, status.Details)
	require.Len(t, status.Details.Causes, 1)
	require.Equal(t, "spec.primary", status.Details.Causes[0].Field)

	db.Spec.Replicas = ptrInt32(1)
	_, err = dbs.Update(ctx, db, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	require.ErrorContains(t, err, "spec.primary")

	got, err := dbs.Get(ctx, "switched", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(3), *got.Spec.Replicas, "nothing is stored")

	// Moving the primary and scaling down in one write is allowed; so is a
	// scale-down once the primary sits below the new count.
	got.Spec.Primary = "switched-1"
	got.Spec.Replicas = ptrInt32(2)
	got, err = dbs.Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, "switched-1", got.Spec.Primary)
	require.Equal(t, int64(2), got.Generation, "a switchover is a spec change")
}

// The controller reports replication through databases/status: status.primary
// and one member per Pod, read back as written over JSON and protobuf; the
// same fields written through the main resource are ignored.
func TestReplicationStatusIsWrittenThroughStatusAndReadBack(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "replicated", examplev1.EnginePostgreSQL, "16")
	db.Spec.Replicas = ptrInt32(3)
	db = create(t, client, db)

	body := `{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"replicated","namespace":"` + ns +
		`","resourceVersion":"` + db.ResourceVersion + `"},"spec":{"engine":"postgresql","version":"16"},"status":{"primary":"replicated-0","members":[` +
		`{"name":"replicated-0","role":"Primary","ready":true},` +
		`{"name":"replicated-1","role":"Replica","ready":true,"streaming":true,"lagBytes":0},` +
		`{"name":"replicated-2","ready":false}]}}`
	resp := do(t, http.MethodPut, databasesPath(ns)+"/replicated/status", []byte(body), nil)
	require.Equal(t, http.StatusOK, resp.code, "%s", resp.body)

	want := []examplev1.DatabaseMember{
		{Name: "replicated-0", Role: examplev1.MemberRolePrimary, Ready: true},
		{Name: "replicated-1", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](0)},
		{Name: "replicated-2"},
	}
	got, err := dbs.Get(ctx, "replicated", metav1.GetOptions{}) // protobuf
	require.NoError(t, err)
	require.Equal(t, "replicated-0", got.Status.Primary)
	require.Equal(t, want, got.Status.Members)
	require.Equal(t, int32(3), *got.Spec.Replicas, "spec written through /status is ignored")

	raw := do(t, http.MethodGet, databasesPath(ns)+"/replicated", nil, nil) // JSON
	require.Equal(t, http.StatusOK, raw.code)
	var fromJSON examplev1.Database
	require.NoError(t, json.Unmarshal(raw.body, &fromJSON))
	require.Equal(t, want, fromJSON.Status.Members)
	require.Contains(t, string(raw.body), `"lagBytes":0`, "a known lag of zero is not dropped")

	// Through the main resource: kept as stored.
	got.Status.Primary = "replicated-1"
	got.Status.Members = nil
	got, err = dbs.Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, "replicated-0", got.Status.Primary)
	require.Equal(t, want, got.Status.Members)

	// A member list with a name twice is a 422 on the field.
	got.Status.Members = append(got.Status.Members, examplev1.DatabaseMember{Name: "replicated-1"})
	_, err = dbs.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	require.ErrorContains(t, err, "status.members[3].name")
}

// What the controller remembers of a switchover and of a replica set's members is in status:
// written through databases/status (an update, or the merge patch the controller sends right
// after a reconfiguration), read back over protobuf, ignored when written through the main
// resource, and validated with the field path.
func TestTheControllersRecordsAreWrittenOnlyThroughStatus(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "remembers", examplev1.EngineMongoDB, "8.0")
	db.Spec.Replicas = ptrInt32(3)
	db = create(t, client, db)

	progress := &examplev1.DatabaseSwitchoverProgress{From: "remembers-0", To: "remembers-2", Step: examplev1.SwitchoverStepElecting}
	db.Status.SwitchoverProgress = progress
	db, err := dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	db, err = dbs.Patch(ctx, "remembers", types.MergePatchType,
		[]byte(`{"metadata":{"uid":"`+string(db.UID)+`"},"status":{"replicaSetMembers":["remembers-0","remembers-1"]}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	got, err := dbs.Get(ctx, "remembers", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, progress, got.Status.SwitchoverProgress)
	require.Equal(t, []string{"remembers-0", "remembers-1"}, got.Status.ReplicaSetMembers)

	// Through the main resource, as a user who may edit the Database: kept as stored.
	edited := got.DeepCopy()
	edited.Status.SwitchoverProgress = nil
	edited.Status.ReplicaSetMembers = []string{"remembers-0"}
	edited, err = dbs.Update(ctx, edited, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, progress, edited.Status.SwitchoverProgress)
	require.Equal(t, []string{"remembers-0", "remembers-1"}, edited.Status.ReplicaSetMembers)

	bad := edited.DeepCopy()
	bad.Status.SwitchoverProgress = &examplev1.DatabaseSwitchoverProgress{From: "remembers-0", To: "other-1", Step: "Failover"}
	bad.Status.ReplicaSetMembers = []string{"remembers-0", "remembers-0"}
	_, err = dbs.UpdateStatus(ctx, bad, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	for _, field := range []string{"status.switchoverProgress.step", "status.switchoverProgress.to", "status.replicaSetMembers[1]"} {
		require.ErrorContains(t, err, field)
	}
}

// status.members is a map keyed by name for server-side apply: a manager that
// applies one member leaves the others, and their owners, alone.
func TestServerSideApplyMergesMembersByName(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "applied", examplev1.EnginePostgreSQL, "16")
	db.Spec.Replicas = ptrInt32(2)
	create(t, client, db)

	_, err := dbs.ApplyStatus(ctx, applyv1.Database("applied", ns).WithStatus(applyv1.DatabaseStatus().
		WithPrimary("applied-0").
		WithMembers(applyv1.DatabaseMember().WithName("applied-0").WithRole(examplev1.MemberRolePrimary).WithReady(true))),
		metav1.ApplyOptions{FieldManager: "controller"})
	require.NoError(t, err)
	got, err := dbs.ApplyStatus(ctx, applyv1.Database("applied", ns).WithStatus(applyv1.DatabaseStatus().
		WithMembers(applyv1.DatabaseMember().WithName("applied-1").WithRole(examplev1.MemberRoleReplica).WithReady(true).WithStreaming(true).WithLagBytes(512))),
		metav1.ApplyOptions{FieldManager: "prober"})
	require.NoError(t, err)

	require.Equal(t, "applied-0", got.Status.Primary)
	require.Equal(t, []examplev1.DatabaseMember{
		{Name: "applied-0", Role: examplev1.MemberRolePrimary, Ready: true},
		{Name: "applied-1", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](512)},
	}, got.Status.Members)
}

// A MySQL Database replicates: spec.primary is stored, and checked against its Pods as a
// PostgreSQL one's is.
func TestMySQLDatabaseTakesAPrimary(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	db := newDatabase(ns, "orders", examplev1.EngineMySQL, "8.4")
	db.Spec.Replicas = ptrInt32(3)
	db.Spec.Primary = "orders-2"
	require.Equal(t, "orders-2", create(t, client, db).Spec.Primary)

	db = newDatabase(ns, "more", examplev1.EngineMySQL, "8.4")
	db.Spec.Replicas = ptrInt32(2)
	db.Spec.Primary = "more-2"
	_, err := client.ExampleV1().Databases(ns).Create(context.Background(), db, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	require.ErrorContains(t, err, `spec.primary: Invalid value: "more-2"`)
}

// More than one replica of a MySQL 8.0 release before 8.0.23, which the controller cannot
// set up replicas on, is refused however the replicas are raised: through the Database and
// through databases/scale, each a 422 on spec.version, and nothing stored.
func TestMySQLReleaseThatCannotReplicateIsNotScaledUp(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "old-mysql", examplev1.EngineMySQL, "8.0.22")
	db.Spec.Replicas = ptrInt32(1)
	db = create(t, client, db)
	const msg = "spec.version: Forbidden: mysql 8.0.22 cannot replicate"

	scale, err := dbs.GetScale(ctx, "old-mysql", metav1.GetOptions{})
	require.NoError(t, err)
	scale.Spec.Replicas = 3
	_, err = dbs.UpdateScale(ctx, "old-mysql", scale, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	require.ErrorContains(t, err, msg)

	resp := do(t, http.MethodPatch, databasesPath(ns)+"/old-mysql/scale", []byte(`{"spec":{"replicas":2}}`),
		map[string]string{"Content-Type": "application/merge-patch+json"})
	require.Equal(t, http.StatusUnprocessableEntity, resp.code, "%s", resp.body)
	require.Equal(t, "spec.version", resp.status(t).Details.Causes[0].Field)

	db.Spec.Replicas = ptrInt32(3)
	_, err = dbs.Update(ctx, db, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	require.ErrorContains(t, err, msg)

	got, err := dbs.Get(ctx, "old-mysql", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(1), *got.Spec.Replicas, "nothing is stored")
	require.Equal(t, db.ResourceVersion, got.ResourceVersion)
}
