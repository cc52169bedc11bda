package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistrytest "k8s.io/apiserver/pkg/registry/generic/testing"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/etcd3"
	etcd3testing "k8s.io/apiserver/pkg/storage/etcd3/testing"
	scalescheme "k8s.io/client-go/scale/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"example.com/database-apiserver/pkg/apis/example"
	"example.com/database-apiserver/pkg/apis/example/install"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

const namespace = "test"

// newStorage returns the storage of databases on a fresh embedded etcd,
// storing example.com/v1 protobuf as the server does (its default storage media
// type), without a watch cache, with one delete-collection worker.
func newStorage(t *testing.T) DatabaseStorage {
	t.Helper()
	return newStorageWithWorkers(t, 1)
}

// newStorageWithWorkers is newStorage with deleteCollectionWorkers workers.
func newStorageWithWorkers(t *testing.T, deleteCollectionWorkers int) DatabaseStorage {
	t.Helper()
	scheme := runtime.NewScheme()
	install.Install(scheme)
	codecs := serializer.NewCodecFactory(scheme)

	_, config := etcd3testing.NewUnsecuredEtcd3TestClientServer(t)
	proto, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	require.True(t, ok, "the scheme's codecs serve protobuf")
	config.Codec = codecs.CodecForVersions(proto.Serializer, codecs.UniversalDecoder(), examplev1.SchemeGroupVersion, runtime.InternalGroupVersioner)
	config.EncodeVersioner = examplev1.SchemeGroupVersion
	config.LeaseManagerConfig = etcd3.NewDefaultLeaseManagerConfig()
	restOptions := generic.RESTOptions{
		StorageConfig:           config.ForResource(example.Resource("databases")),
		Decorator:               generic.UndecoratedStorage,
		DeleteCollectionWorkers: deleteCollectionWorkers,
		ResourcePrefix:          "example.com/databases",
	}

	s, err := NewStorage(scheme, restOptions, managedfields.NewDeducedTypeConverter(), "cluster.local")
	require.NoError(t, err)
	t.Cleanup(s.Database.Destroy)
	return s
}

// validDatabase is artifacts/examples/database.yaml in the test namespace, under name.
func validDatabase(name string) *example.Database {
	return &example.Database{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: example.DatabaseSpec{
			Engine:   example.EnginePostgreSQL,
			Version:  "14.5",
			Replicas: ptr.To[int32](3),
			Storage:  "100Gi",
		},
	}
}

func testContext(s DatabaseStorage, subresources ...string) context.Context {
	return genericregistrytest.NewNamespaceScopeContext(s.Database.Store, namespace, subresources...)
}

func create(t *testing.T, s DatabaseStorage, db *example.Database) *example.Database {
	t.Helper()
	obj, err := s.Database.Create(testContext(s), db, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	require.NoError(t, err)
	return obj.(*example.Database)
}

func get(t *testing.T, s DatabaseStorage, name string) *example.Database {
	t.Helper()
	obj, err := s.Database.Get(testContext(s), name, &metav1.GetOptions{})
	require.NoError(t, err)
	return obj.(*example.Database)
}

func update(s DatabaseStorage, db *example.Database) (*example.Database, error) {
	obj, _, err := s.Database.Update(testContext(s), db.Name, rest.DefaultUpdatedObjectInfo(db),
		rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return obj.(*example.Database), nil
}

func updateScale(s DatabaseStorage, scale *scalescheme.Scale, updateValidation rest.ValidateObjectUpdateFunc) (*scalescheme.Scale, error) {
	obj, created, err := s.Scale.Update(testContext(s, "scale"), scale.Name, rest.DefaultUpdatedObjectInfo(scale),
		rest.ValidateAllObjectFunc, updateValidation, false, &metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	if created {
		return nil, errors.New("a scale update reported a create")
	}
	return obj.(*scalescheme.Scale), nil
}

// requireInvalidOn requires err to be a 422 Invalid of kind on field path.
func requireInvalidOn(t *testing.T, err error, kind schema.GroupKind, path string) {
	t.Helper()
	require.Truef(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
	var status apierrors.APIStatus
	require.True(t, errors.As(err, &status))
	details := status.Status().Details
	require.Equal(t, kind.Group, details.Group)
	require.Equal(t, kind.Kind, details.Kind)
	var causeFields []string
	for _, c := range details.Causes {
		causeFields = append(causeFields, c.Field)
	}
	require.Contains(t, causeFields, path)
}

// TestGenericStoreBehaviour runs upstream's conformance checks of a generic
// store (create, update, delete, get, list, watch) against databases, each on
// its own etcd since they reuse object names.
func TestGenericStoreBehaviour(t *testing.T) {
	valid := func() *example.Database { return validDatabase("generic") }
	tests := []struct {
		name string
		run  func(test *genericregistrytest.Tester)
	}{
		{"create", func(test *genericregistrytest.Tester) {
			invalid := valid()
			invalid.Spec.Engine = "oracle"
			test.TestCreate(valid(), invalid)
		}},
		{"update", func(test *genericregistrytest.Tester) {
			test.TestUpdate(valid(),
				func(obj runtime.Object) runtime.Object {
					db := obj.(*example.Database)
					db.Spec.Replicas = ptr.To[int32](5)
					return db
				},
				func(obj runtime.Object) runtime.Object {
					db := obj.(*example.Database)
					db.Spec.Engine = example.EngineMySQL
					return db
				},
				func(obj runtime.Object) runtime.Object {
					db := obj.(*example.Database)
					db.Spec.Replicas = ptr.To[int32](11)
					return db
				},
			)
		}},
		{"delete", func(test *genericregistrytest.Tester) { test.TestDelete(valid()) }},
		{"get", func(test *genericregistrytest.Tester) { test.TestGet(valid()) }},
		{"list", func(test *genericregistrytest.Tester) { test.TestList(valid()) }},
		{"watch", func(test *genericregistrytest.Tester) {
			test.TestWatch(valid(),
				[]labels.Set{{}},
				[]labels.Set{{"a": "c"}, {"foo": "bar"}},
				[]fields.Set{
					{"metadata.name": "generic"},
					{"spec.engine": "postgresql"},
					{"spec.version": "14.5"},
				},
				[]fields.Set{
					{"metadata.name": "other"},
					{"spec.engine": "mysql"},
					{"status.phase": "Ready"},
				},
			)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(genericregistrytest.New(t, newStorage(t).Database.Store))
		})
	}
}

func TestCreateClearsStatusAndSetsGenerationOne(t *testing.T) {
	s := newStorage(t)
	db := validDatabase("created")
	db.Generation = 7
	db.Status = example.DatabaseStatus{Phase: example.DatabasePhaseReady, ReadyReplicas: 3, ObservedGeneration: 7}

	created := create(t, s, db)

	require.Equal(t, int64(1), created.Generation)
	require.Equal(t, example.DatabaseStatus{}, created.Status)
	stored := get(t, s, "created")
	require.Equal(t, int64(1), stored.Generation)
	require.Equal(t, example.DatabaseStatus{}, stored.Status)
	require.Equal(t, validDatabase("created").Spec, stored.Spec)
}

func TestUpdateBumpsGenerationOnlyOnSpecChange(t *testing.T) {
	tests := []struct {
		name           string
		mutate         func(*example.Database)
		wantGeneration int64
	}{
		{"spec replicas", func(db *example.Database) { db.Spec.Replicas = ptr.To[int32](5) }, 2},
		{"spec storage grows", func(db *example.Database) { db.Spec.Storage = "200Gi" }, 2},
		{"labels only", func(db *example.Database) { db.Labels = map[string]string{"team": "payments"} }, 1},
		{"annotations only", func(db *example.Database) { db.Annotations = map[string]string{"note": "x"} }, 1},
	}
	s := newStorage(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := create(t, s, validDatabase("gen"))
			t.Cleanup(func() {
				_, _, err := s.Database.Delete(testContext(s), "gen", rest.ValidateAllObjectFunc, nil)
				require.NoError(t, err)
			})
			tc.mutate(db)

			updated, err := update(s, db)
			require.NoError(t, err)

			require.Equal(t, tc.wantGeneration, updated.Generation)
			require.Equal(t, tc.wantGeneration, get(t, s, "gen").Generation)
		})
	}
}

func TestStatusWrittenThroughMainResourceIsIgnored(t *testing.T) {
	s := newStorage(t)
	db := create(t, s, validDatabase("main"))
	db.Status = example.DatabaseStatus{Phase: example.DatabasePhaseReady, ReadyReplicas: 3}
	db.Spec.Replicas = ptr.To[int32](4)

	updated, err := update(s, db)
	require.NoError(t, err)

	require.Equal(t, example.DatabaseStatus{}, updated.Status)
	stored := get(t, s, "main")
	require.Equal(t, example.DatabaseStatus{}, stored.Status)
	require.Equal(t, ptr.To[int32](4), stored.Spec.Replicas, "the spec part of the write is kept")
}

func TestSpecWrittenThroughStatusIsIgnored(t *testing.T) {
	s := newStorage(t)
	db := create(t, s, validDatabase("status"))
	db.Spec.Replicas = ptr.To[int32](7)
	db.Spec.Version = "14.6"
	db.Labels = map[string]string{"sneaky": "yes"}
	db.Status = example.DatabaseStatus{
		Phase:              example.DatabasePhaseProvisioning,
		ReadyReplicas:      1,
		ObservedGeneration: 1,
		Selector:           "app.kubernetes.io/instance=status",
	}

	obj, _, err := s.Status.Update(testContext(s, "status"), "status", rest.DefaultUpdatedObjectInfo(db),
		rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)

	updated := obj.(*example.Database)
	require.Equal(t, db.Status, updated.Status)
	stored := get(t, s, "status")
	require.Equal(t, validDatabase("status").Spec, stored.Spec)
	require.Empty(t, stored.Labels)
	require.Equal(t, db.Status, stored.Status)
	require.Equal(t, int64(1), stored.Generation, "a status write never bumps generation")
}

func TestStatusUpdateNeverCreates(t *testing.T) {
	s := newStorage(t)
	_, _, err := s.Status.Update(testContext(s, "status"), "missing", rest.DefaultUpdatedObjectInfo(validDatabase("missing")),
		rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, true, &metav1.UpdateOptions{})
	require.True(t, apierrors.IsNotFound(err), "want NotFound, got %v", err)
}

func TestScaleGetReturnsMappedScale(t *testing.T) {
	s := newStorage(t)
	create(t, s, validDatabase("scaled"))
	db := get(t, s, "scaled")
	db.Status = example.DatabaseStatus{ReadyReplicas: 2, Selector: "app.kubernetes.io/instance=scaled,app.kubernetes.io/name=postgresql"}
	_, _, err := s.Status.Update(testContext(s, "status"), "scaled", rest.DefaultUpdatedObjectInfo(db),
		rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	db = get(t, s, "scaled")

	obj, err := s.Scale.Get(testContext(s, "scale"), "scaled", &metav1.GetOptions{})
	require.NoError(t, err)

	require.Equal(t, &scalescheme.Scale{
		ObjectMeta: metav1.ObjectMeta{
			Name:              "scaled",
			Namespace:         namespace,
			UID:               db.UID,
			ResourceVersion:   db.ResourceVersion,
			CreationTimestamp: db.CreationTimestamp,
		},
		Spec:   scalescheme.ScaleSpec{Replicas: 3},
		Status: scalescheme.ScaleStatus{Replicas: 2},
	}, withoutSelector(obj.(*scalescheme.Scale)))
	selector, err := metav1.LabelSelectorAsMap(obj.(*scalescheme.Scale).Status.Selector)
	require.NoError(t, err)
	require.Equal(t, map[string]string{
		"app.kubernetes.io/instance": "scaled",
		"app.kubernetes.io/name":     "postgresql",
	}, selector)
}

func TestScaleGetLeavesSelectorNilUntilStatusHasOne(t *testing.T) {
	s := newStorage(t)
	create(t, s, validDatabase("fresh"))

	obj, err := s.Scale.Get(testContext(s, "scale"), "fresh", &metav1.GetOptions{})
	require.NoError(t, err)
	require.Nil(t, obj.(*scalescheme.Scale).Status.Selector)
}

// withoutSelector returns a copy of scale with no status.selector.
func withoutSelector(scale *scalescheme.Scale) *scalescheme.Scale {
	scale = scale.DeepCopy()
	scale.Status.Selector = nil
	return scale
}

func TestScaleGetOfMissingDatabaseIsNotFound(t *testing.T) {
	s := newStorage(t)
	_, err := s.Scale.Get(testContext(s, "scale"), "missing", &metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "want NotFound, got %v", err)
}

func TestScaleUpdateSetsSpecReplicasAndBumpsGeneration(t *testing.T) {
	s := newStorage(t)
	create(t, s, validDatabase("scaled"))
	obj, err := s.Scale.Get(testContext(s, "scale"), "scaled", &metav1.GetOptions{})
	require.NoError(t, err)
	scale := obj.(*scalescheme.Scale)
	scale.Spec.Replicas = 5

	var admitted []runtime.Object
	got, err := updateScale(s, scale, func(ctx context.Context, obj, old runtime.Object) error {
		admitted = append(admitted, obj, old)
		return nil
	})
	require.NoError(t, err)

	require.Equal(t, int32(5), got.Spec.Replicas)
	stored := get(t, s, "scaled")
	require.Equal(t, ptr.To[int32](5), stored.Spec.Replicas)
	require.Equal(t, int64(2), stored.Generation)
	require.Equal(t, stored.ResourceVersion, got.ResourceVersion)

	require.Len(t, admitted, 2)
	require.IsType(t, &scalescheme.Scale{}, admitted[0], "admission sees the new Scale")
	require.IsType(t, &scalescheme.Scale{}, admitted[1], "admission sees the old Scale")
	require.Equal(t, int32(5), admitted[0].(*scalescheme.Scale).Spec.Replicas)
	require.Equal(t, int32(3), admitted[1].(*scalescheme.Scale).Spec.Replicas)
}

func TestScaleUpdateMovesReplicasOwnershipToTheScaleWriter(t *testing.T) {
	s := newStorage(t)
	db := validDatabase("owned")
	db.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager:    "kubectl",
		Operation:  metav1.ManagedFieldsOperationUpdate,
		APIVersion: "example.com/v1",
		FieldsType: "FieldsV1",
		FieldsV1:   &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:engine":{},"f:replicas":{}}}`)},
	}}
	create(t, s, db)

	_, err := updateScale(s, &scalescheme.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "owned", Namespace: namespace, ManagedFields: []metav1.ManagedFieldsEntry{{
			Manager:    "autoscaler",
			Operation:  metav1.ManagedFieldsOperationUpdate,
			APIVersion: "autoscaling/v1",
			FieldsType: "FieldsV1",
			FieldsV1:   &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)},
		}}},
		Spec: scalescheme.ScaleSpec{Replicas: 4},
	}, rest.ValidateAllObjectUpdateFunc)
	require.NoError(t, err)

	owned := map[string]string{}
	for _, entry := range get(t, s, "owned").ManagedFields {
		require.Equal(t, "example.com/v1", entry.APIVersion, "entries stay in the Database's version")
		owned[entry.Manager] = string(entry.FieldsV1.Raw)
	}
	require.Equal(t, map[string]string{
		"kubectl":    `{"f:spec":{"f:engine":{}}}`,
		"autoscaler": `{"f:spec":{"f:replicas":{}}}`,
	}, owned)
}

func TestScaleUpdateRefusedByAdmissionIsNotStored(t *testing.T) {
	s := newStorage(t)
	create(t, s, validDatabase("scaled"))
	denied := apierrors.NewForbidden(example.Resource("databases/scale"), "scaled", errors.New("no"))

	_, err := updateScale(s, &scalescheme.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: namespace},
		Spec:       scalescheme.ScaleSpec{Replicas: 5},
	}, func(context.Context, runtime.Object, runtime.Object) error { return denied })

	require.Equal(t, denied, err)
	require.Equal(t, ptr.To[int32](3), get(t, s, "scaled").Spec.Replicas)
}

func TestScaleUpdateRejectsInvalidReplicas(t *testing.T) {
	tests := []struct {
		name     string
		replicas int32
		wantKind schema.GroupKind
	}{
		{"above the Database maximum", 11, example.Kind("Database")},
		{"below the Database minimum", 0, example.Kind("Database")},
		{"negative, reported like zero", -1, example.Kind("Database")},
	}
	s := newStorage(t)
	create(t, s, validDatabase("scaled"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := updateScale(s, &scalescheme.Scale{
				ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: namespace},
				Spec:       scalescheme.ScaleSpec{Replicas: tc.replicas},
			}, rest.ValidateAllObjectUpdateFunc)

			requireInvalidOn(t, err, tc.wantKind, "spec.replicas")
			require.Equal(t, ptr.To[int32](3), get(t, s, "scaled").Spec.Replicas)
		})
	}
}

// A scale-down through databases/scale goes through the Database's update
// validation: dropping the Pod spec.primary names is the 422 on spec.primary a
// write of the Database gets, not a 500, and nothing is stored.
func TestScaleUpdateThatWouldRemoveTheNamedPrimaryIsInvalid(t *testing.T) {
	s := newStorage(t)
	db := validDatabase("scaled")
	db.Spec.Primary = "scaled-2"
	create(t, s, db)

	for _, replicas := range []int32{2, 1} {
		_, err := updateScale(s, &scalescheme.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: namespace},
			Spec:       scalescheme.ScaleSpec{Replicas: replicas},
		}, rest.ValidateAllObjectUpdateFunc)

		requireInvalidOn(t, err, example.Kind("Database"), "spec.primary")
		require.ErrorContains(t, err, "while spec.primary names this Pod: name one of scaled-")
		require.Equal(t, ptr.To[int32](3), get(t, s, "scaled").Spec.Replicas)
	}

	// Up is fine, and so is down once the primary sits below the new count.
	_, err := updateScale(s, &scalescheme.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: namespace},
		Spec:       scalescheme.ScaleSpec{Replicas: 5},
	}, rest.ValidateAllObjectUpdateFunc)
	require.NoError(t, err)
	moved := get(t, s, "scaled")
	moved.Spec.Primary = "scaled-0"
	_, err = update(s, moved)
	require.NoError(t, err)
	got, err := updateScale(s, &scalescheme.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: namespace},
		Spec:       scalescheme.ScaleSpec{Replicas: 1},
	}, rest.ValidateAllObjectUpdateFunc)
	require.NoError(t, err)
	require.Equal(t, int32(1), got.Spec.Replicas)
}

func TestCreateWithAPrimaryThatIsNotOneOfItsPodsIsInvalid(t *testing.T) {
	s := newStorage(t)
	db := validDatabase("bad-primary")
	db.Spec.Primary = "bad-primary-3"
	_, err := s.Database.Create(testContext(s), db, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	requireInvalidOn(t, err, example.Kind("Database"), "spec.primary")
	require.ErrorContains(t, err, "must be one of the Database's Pods: bad-primary-0 … bad-primary-2")
}

func TestReplicationStatusIsWrittenThroughStatusOnly(t *testing.T) {
	s := newStorage(t)
	db := create(t, s, validDatabase("members"))
	members := []example.DatabaseMember{
		{Name: "members-0", Role: example.MemberRolePrimary, Ready: true},
		{Name: "members-1", Role: example.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](128)},
		{Name: "members-2"},
	}

	// Through the main resource: ignored.
	db.Status.Primary = "members-0"
	db.Status.Members = members
	_, err := update(s, db)
	require.NoError(t, err)
	require.Empty(t, get(t, s, "members").Status.Members)

	// Through databases/status: stored and read back, the protobuf storage included.
	db = get(t, s, "members")
	db.Status.Primary = "members-0"
	db.Status.Members = members
	_, _, err = s.Status.Update(testContext(s, "status"), "members", rest.DefaultUpdatedObjectInfo(db),
		rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)
	stored := get(t, s, "members")
	require.Equal(t, "members-0", stored.Status.Primary)
	require.Equal(t, members, stored.Status.Members)

	// A broken member is a 422 on its field.
	stored.Status.Members[1].Role = "Leader"
	_, _, err = s.Status.Update(testContext(s, "status"), "members", rest.DefaultUpdatedObjectInfo(stored),
		rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	requireInvalidOn(t, err, example.Kind("Database"), "status.members[1].role")
}

// A restore's pointInTime outside its source's recoverability window, read from the store,
// is a 422 naming the field, and nothing is stored; a source that is gone is not checked.
func TestCreateRestoringOutsideTheSourcesWindowIsInvalid(t *testing.T) {
	s := newStorage(t)
	now := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	s.Database.now = func() time.Time { return now }
	source := create(t, s, validDatabase("ledger"))
	first := metav1.NewTime(now.Add(-24 * time.Hour))
	source.Status.Backup = &example.DatabaseBackupStatus{FirstRecoverableTime: &first}
	_, _, err := s.Status.Update(testContext(s, "status"), "ledger", rest.DefaultUpdatedObjectInfo(source),
		rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)

	restoring := func(name, from, at string) *example.Database {
		db := validDatabase(name)
		db.Spec.Backup = &example.DatabaseBackupPolicy{S3: example.DatabaseBackupS3{
			Endpoint: "https://s3.example.com", Bucket: "backups", SecretName: "store"}}
		db.Spec.Restore = &example.DatabaseRestore{Database: from, PointInTime: at}
		return db
	}
	for _, at := range []string{"2026-12-04T07:59:59Z", "2026-12-05T08:00:01Z"} {
		_, err := s.Database.Create(testContext(s), restoring("ledger-copy", "ledger", at), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
		requireInvalidOn(t, err, example.Kind("Database"), "spec.restore.pointInTime")
		require.ErrorContains(t, err, "recoverability window of Database \"ledger\": from 2026-12-04T08:00:00Z")
		_, err = s.Database.Get(testContext(s), "ledger-copy", &metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "nothing stored: %v", err)
	}
	_, err = s.Database.Create(testContext(s), restoring("later", "gone", "2027-01-01T00:00:00Z"), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	requireInvalidOn(t, err, example.Kind("Database"), "spec.restore.pointInTime")
	require.ErrorContains(t, err, "must not be later than now")
}

func TestScaleUpdatePreconditionsConflict(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(scale *scalescheme.Scale)
	}{
		{"stale resourceVersion", func(*scalescheme.Scale) {}},
		{"other uid", func(scale *scalescheme.Scale) {
			scale.ResourceVersion = ""
			scale.UID = types.UID("another-database")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStorage(t)
			create(t, s, validDatabase("scaled"))
			obj, err := s.Scale.Get(testContext(s, "scale"), "scaled", &metav1.GetOptions{})
			require.NoError(t, err)
			stale := obj.(*scalescheme.Scale)
			// Someone else writes in between.
			db := get(t, s, "scaled")
			db.Labels = map[string]string{"touched": "yes"}
			_, err = update(s, db)
			require.NoError(t, err)

			tc.mutate(stale)
			stale.Spec.Replicas = 5
			_, err = updateScale(s, stale, rest.ValidateAllObjectUpdateFunc)

			require.Truef(t, apierrors.IsConflict(err), "want Conflict, got %v", err)
			require.Equal(t, ptr.To[int32](3), get(t, s, "scaled").Spec.Replicas)
		})
	}
}

func TestScaleUpdateOfMissingDatabaseIsNotFound(t *testing.T) {
	s := newStorage(t)
	_, err := updateScale(s, &scalescheme.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "missing", Namespace: namespace},
		Spec:       scalescheme.ScaleSpec{Replicas: 2},
	}, rest.ValidateAllObjectUpdateFunc)
	require.Truef(t, apierrors.IsNotFound(err), "want NotFound, got %v", err)
}

func TestListFieldSelectorOnEngine(t *testing.T) {
	s := newStorage(t)
	orders := validDatabase("orders")
	orders.Spec.Engine = example.EngineMySQL
	orders.Spec.Version = "8.4"
	create(t, s, orders)
	create(t, s, validDatabase("payments"))
	sessions := validDatabase("sessions")
	sessions.Spec.Engine = example.EngineMongoDB
	sessions.Spec.Version = "7.0"
	create(t, s, sessions)

	tests := []struct {
		selector  fields.Selector
		wantNames []string
	}{
		{fields.OneTermEqualSelector("spec.engine", "mysql"), []string{"orders"}},
		{fields.OneTermEqualSelector("spec.engine", "postgresql"), []string{"payments"}},
		{fields.OneTermNotEqualSelector("spec.engine", "mysql"), []string{"payments", "sessions"}},
		{fields.OneTermEqualSelector("spec.version", "7.0"), []string{"sessions"}},
		{fields.Everything(), []string{"orders", "payments", "sessions"}},
	}
	for _, tc := range tests {
		t.Run(tc.selector.String(), func(t *testing.T) {
			obj, err := s.Database.List(testContext(s), &metainternalversion.ListOptions{FieldSelector: tc.selector})
			require.NoError(t, err)

			var names []string
			for _, db := range obj.(*example.DatabaseList).Items {
				names = append(names, db.Name)
			}
			require.ElementsMatch(t, tc.wantNames, names)
		})
	}
}

func TestDiscoveryNames(t *testing.T) {
	s := newStorage(t)
	require.Equal(t, []string{"db"}, s.Database.ShortNames())
	require.Equal(t, "database", s.Database.GetSingularName())
	_, isCategorized := any(s.Database).(rest.CategoriesProvider)
	require.False(t, isCategorized, "databases stay out of `kubectl get/delete all`")
	require.Equal(t,
		schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
		s.Scale.GroupVersionKind(examplev1.SchemeGroupVersion))
	require.IsType(t, &scalescheme.Scale{}, s.Scale.New())
	require.IsType(t, &example.Database{}, s.Status.New())
}

func TestResetFieldsOfMainAndStatusStores(t *testing.T) {
	s := newStorage(t)
	mainReset := s.Database.GetResetFields()["example.com/v1"]
	statusReset := s.Status.GetResetFields()["example.com/v1"]
	require.NotNil(t, mainReset)
	require.NotNil(t, statusReset)
	require.True(t, mainReset.Has(fieldpath.MakePathOrDie("status")))
	require.False(t, mainReset.Has(fieldpath.MakePathOrDie("spec")))
	require.True(t, statusReset.Has(fieldpath.MakePathOrDie("spec")))
	require.False(t, statusReset.Has(fieldpath.MakePathOrDie("status")))
}

// deleteCollection deletes the Databases of the test namespace as a namespace
// deletion does, with deleteValidation as admission, and returns the names
// left.
func deleteCollection(t *testing.T, s DatabaseStorage, deleteValidation rest.ValidateObjectFunc, listOptions *metainternalversion.ListOptions) (runtime.Object, []string, error) {
	t.Helper()
	obj, err := s.Database.DeleteCollection(testContext(s), deleteValidation, &metav1.DeleteOptions{}, listOptions)
	left, listErr := s.Database.List(testContext(s), &metainternalversion.ListOptions{})
	require.NoError(t, listErr)
	var names []string
	for _, db := range left.(*example.DatabaseList).Items {
		names = append(names, db.Name)
	}
	return obj, names, err
}

func TestDeleteCollectionDeletesWithTheConfiguredWorkersAtOnce(t *testing.T) {
	const workers = 4
	s := newStorageWithWorkers(t, workers)
	for i := range workers {
		create(t, s, validDatabase(fmt.Sprintf("db-%d", i)))
	}
	// Each delete waits in admission until all workers are in it: one worker
	// deleting one Database after another would wait out the timeout.
	var arrived sync.WaitGroup
	arrived.Add(workers)
	allIn := make(chan struct{})
	go func() { arrived.Wait(); close(allIn) }()
	validation := func(ctx context.Context, obj runtime.Object) error {
		arrived.Done()
		select {
		case <-allIn:
			return nil
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%s: fewer than %d deletes at once", obj.(*example.Database).Name, workers)
		}
	}

	obj, left, err := deleteCollection(t, s, validation, nil)
	require.NoError(t, err)
	require.Empty(t, left)
	require.Len(t, obj.(*example.DatabaseList).Items, workers, "the list of every Database deleted")
}

func TestDeleteCollectionWithALimitDeletesOnePage(t *testing.T) {
	s := newStorage(t)
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		create(t, s, validDatabase(name))
	}
	obj, left, err := deleteCollection(t, s, rest.ValidateAllObjectFunc, &metainternalversion.ListOptions{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"c", "d", "e"}, left)
	page := obj.(*example.DatabaseList)
	require.Len(t, page.Items, 2)
	require.NotEmpty(t, page.Continue, "the page says there is more")
}

func TestDeleteCollectionSkipsDoNotTerminateAndNamesThem(t *testing.T) {
	s := newStorageWithWorkers(t, 3)
	for _, name := range []string{"a", "b-protected", "c", "d", "e-protected", "f"} {
		db := validDatabase(name)
		if strings.HasSuffix(name, "-protected") {
			db.Spec.DeletionPolicy = example.DeletionPolicyDoNotTerminate
		}
		create(t, s, db)
	}
	var admitted atomic.Int32
	validation := func(context.Context, runtime.Object) error { admitted.Add(1); return nil }

	_, left, err := deleteCollection(t, s, validation, nil)
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	require.ErrorContains(t, err, "b-protected, e-protected")
	require.Equal(t, []string{"b-protected", "e-protected"}, left)
	require.EqualValues(t, 4, admitted.Load(), "admission runs once for each Database deleted, never for a protected one")
}

func TestDeleteCollectionStopsAtAnAdmissionRefusal(t *testing.T) {
	s := newStorage(t)
	for _, name := range []string{"a", "b", "c"} {
		create(t, s, validDatabase(name))
	}
	refuseB := func(_ context.Context, obj runtime.Object) error {
		if obj.(*example.Database).Name == "b" {
			return apierrors.NewForbidden(example.Resource("databases"), "b", errors.New("refused by policy"))
		}
		return nil
	}
	_, left, err := deleteCollection(t, s, refuseB, nil)
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	require.ErrorContains(t, err, "refused by policy")
	require.Equal(t, []string{"b", "c"}, left, "one worker deletes in list order and stops at the refusal")
}
