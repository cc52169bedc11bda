package database

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"example.com/database-apiserver/pkg/apis/example"
	"example.com/database-apiserver/pkg/apis/example/install"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"

	// The engines register their rules.
	_ "example.com/database-apiserver/pkg/engine/engines"
)

func newTestStrategy() Strategy {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	return NewStrategy(scheme)
}

// storedDatabase is the example Database as stored: generation 4, a
// switchover to my-database-2 asked in spec.primary, a status reported by the
// controller (my-database-0 still primary), labels set.
func storedDatabase() *example.Database {
	db := exampleDatabase()
	db.Generation = 4
	db.Spec.Primary = "my-database-2"
	db.Labels = map[string]string{"team": "payments"}
	db.Status = example.DatabaseStatus{
		Phase:              example.DatabasePhaseReady,
		ReadyReplicas:      3,
		ObservedGeneration: 4,
		Selector:           "app.kubernetes.io/instance=my-database",
		Primary:            "my-database-0",
		Members: []example.DatabaseMember{
			{Name: "my-database-0", Role: example.MemberRolePrimary, Ready: true},
			{Name: "my-database-1", Role: example.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](0)},
			{Name: "my-database-2", Role: example.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](4096)},
		},
		Conditions: []metav1.Condition{
			{Type: examplev1.ConditionReady, Status: metav1.ConditionTrue, Reason: "AllReplicasReady", LastTransitionTime: metav1.Now()},
		},
	}
	return db
}

func TestStrategyScopeAndUpdatePolicy(t *testing.T) {
	s := newTestStrategy()
	require.True(t, s.NamespaceScoped(), "Databases are namespaced")
	require.False(t, s.AllowCreateOnUpdate(context.Background()), "PUT must not create a Database")
	require.True(t, s.AllowUnconditionalUpdate(context.Background()), "an update without resourceVersion is allowed")
	require.Equal(t, s.NamespaceScoped(), NewStatusStrategy(s).NamespaceScoped())
}

func TestPrepareForCreateClearsStatusAndSetsGenerationOne(t *testing.T) {
	db := storedDatabase()
	db.Generation = 9
	wantSpec := *db.Spec.DeepCopy()

	newTestStrategy().PrepareForCreate(context.Background(), db)

	require.Equal(t, example.DatabaseStatus{}, db.Status)
	require.Equal(t, int64(1), db.Generation)
	require.Equal(t, wantSpec, db.Spec, "spec is the user's and stays")
}

// A resourceVersion copied from another object (kubectl get -o yaml, edited
// and created elsewhere) is storage's to assign, not an error.
func TestPrepareForCreateClearsResourceVersion(t *testing.T) {
	db := exampleDatabase()
	db.ResourceVersion = "5"
	newTestStrategy().PrepareForCreate(context.Background(), db)
	require.Empty(t, db.ResourceVersion)
}

func TestPrepareWritesStorageCanonically(t *testing.T) {
	db := exampleDatabase()
	db.Spec.Storage = "0100Gi"
	newTestStrategy().PrepareForCreate(context.Background(), db)
	require.Equal(t, "100Gi", db.Spec.Storage)

	old := storedDatabase()
	updated := old.DeepCopy()
	updated.Spec.Storage = "000" + old.Spec.Storage
	newTestStrategy().PrepareForUpdate(context.Background(), updated, old)
	require.Equal(t, old.Spec.Storage, updated.Spec.Storage)
	require.Equal(t, old.Generation, updated.Generation, "the same size written differently is no spec change")
}

func TestPrepareForUpdateBumpsGenerationOnlyWhenSpecChanges(t *testing.T) {
	tests := []struct {
		name           string
		mutate         func(*example.Database)
		wantGeneration int64
	}{
		{"no change", func(*example.Database) {}, 4},
		{"replicas changed", func(db *example.Database) { db.Spec.Replicas = ptr.To[int32](5) }, 5},
		{"replicas unset", func(db *example.Database) { db.Spec.Replicas = nil }, 5},
		{"version changed", func(db *example.Database) { db.Spec.Version = "14.6" }, 5},
		{"storage changed", func(db *example.Database) { db.Spec.Storage = "200Gi" }, 5},
		{"switchover asked (primary named)", func(db *example.Database) { db.Spec.Primary = "my-database-1" }, 5},
		{"same replicas in a new pointer", func(db *example.Database) { db.Spec.Replicas = ptr.To[int32](3) }, 4},
		{"labels changed", func(db *example.Database) { db.Labels = map[string]string{"team": "orders"} }, 4},
		{"annotations changed", func(db *example.Database) { db.Annotations = map[string]string{"note": "x"} }, 4},
		{"finalizer added", func(db *example.Database) { db.Finalizers = []string{"example.com/cleanup"} }, 4},
		{"status changed only", func(db *example.Database) { db.Status.Phase = example.DatabasePhaseFailed }, 4},
		{"status primary changed only", func(db *example.Database) { db.Status.Primary = "my-database-1" }, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := storedDatabase()
			db := old.DeepCopy()
			tc.mutate(db)

			newTestStrategy().PrepareForUpdate(context.Background(), db, old)

			require.Equal(t, tc.wantGeneration, db.Generation)
		})
	}
}

func TestPrepareForUpdateKeepsStoredStatus(t *testing.T) {
	old := storedDatabase()
	db := old.DeepCopy()
	db.Status = example.DatabaseStatus{
		Phase: example.DatabasePhaseFailed, ReadyReplicas: 0, ObservedGeneration: 99,
		Primary: "my-database-2",
		Members: []example.DatabaseMember{{Name: "my-database-2", Role: example.MemberRolePrimary}},
	}
	db.Spec.Replicas = ptr.To[int32](5)
	db.Spec.Primary = "my-database-4"

	newTestStrategy().PrepareForUpdate(context.Background(), db, old)

	require.NotNil(t, db.Status.Switchover, "the change of spec.primary is recorded")
	db.Status.Switchover = nil
	require.Equal(t, old.Status, db.Status, "status.primary and status.members are the controller's, written through status")
	require.Equal(t, ptr.To[int32](5), db.Spec.Replicas, "the spec change is kept")
	require.Equal(t, "my-database-4", db.Spec.Primary, "spec.primary is the user's, written through the main resource")
}

// A write that changes spec.primary to a Pod is recorded in status.switchover, as
// databases/switchover records its own: who, when (to the second) and which Pod. One that
// keeps it, or clears it, records nothing.
func TestPrepareForUpdateRecordsAChangeOfSpecPrimary(t *testing.T) {
	old := storedDatabase()
	old.Spec.Primary = "my-database-0"
	old.Status.Switchover = &example.DatabaseSwitchoverStatus{RequestedBy: "earlier", RequestedAt: metav1.Unix(100, 0), Target: "my-database-0"}
	ctx := genericapirequest.WithUser(context.Background(), &user.DefaultInfo{Name: "jane"})

	db := old.DeepCopy()
	db.Spec.Primary = "my-database-2"
	before := metav1.Now().Rfc3339Copy()
	newTestStrategy().PrepareForUpdate(ctx, db, old)
	s := db.Status.Switchover
	require.NotNil(t, s)
	require.Equal(t, []string{"jane", "my-database-2"}, []string{s.RequestedBy, s.Target})
	require.False(t, s.RequestedAt.Before(&before), "requested now: %v", s.RequestedAt)
	require.Equal(t, s.RequestedAt.Rfc3339Copy(), s.RequestedAt, "to the second")

	for name, primary := range map[string]string{"kept": "my-database-0", "cleared": ""} {
		db := old.DeepCopy()
		db.Spec.Primary = primary
		newTestStrategy().PrepareForUpdate(ctx, db, old)
		require.Equal(t, old.Status.Switchover, db.Status.Switchover, name)
	}
}

// A tenant who may write the Database (edit) but not databases/status cannot give the
// controller a switchover record, or take one away, through the main resource: neither
// status.switchoverProgress nor a condition whose message reads as a switchover's is stored.
// Through databases/status (the controller's), both are.
func TestOnlyTheStatusSubresourceWritesTheSwitchoverRecord(t *testing.T) {
	switchover := metav1.Condition{Type: "Progressing", Status: metav1.ConditionTrue, Reason: "Switchover",
		Message: "switching over from my-database-0 to my-database-1: stopping my-database-0"}
	progress := &example.DatabaseSwitchoverProgress{From: "my-database-0", To: "my-database-1", Step: example.SwitchoverStepStoppingPrimary}
	for _, tc := range []struct {
		name   string
		stored *example.DatabaseSwitchoverProgress
		write  *example.DatabaseSwitchoverProgress
	}{
		{"added", nil, progress},
		{"changed", progress, &example.DatabaseSwitchoverProgress{From: "my-database-0", To: "my-database-2", Step: example.SwitchoverStepPromoting}},
		{"removed", progress, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := storedDatabase()
			old.Status.SwitchoverProgress = tc.stored.DeepCopy()
			db := old.DeepCopy()
			db.Status.SwitchoverProgress = tc.write.DeepCopy()
			db.Status.Conditions = []metav1.Condition{switchover}
			newTestStrategy().PrepareForUpdate(context.Background(), db, old)
			require.Equal(t, old.Status, db.Status, "the main resource keeps the stored status")

			db = old.DeepCopy()
			db.Status.SwitchoverProgress = tc.write.DeepCopy()
			NewStatusStrategy(newTestStrategy()).PrepareForUpdate(context.Background(), db, old)
			require.Equal(t, tc.write, db.Status.SwitchoverProgress, "databases/status writes it")
		})
	}
}

func TestStatusPrepareForUpdateKeepsStoredSpecAndLabels(t *testing.T) {
	old := storedDatabase()
	db := old.DeepCopy()
	db.Spec = example.DatabaseSpec{Engine: example.EngineMySQL, Version: "8.4", Replicas: ptr.To[int32](1), Storage: "1Gi"}
	db.Labels = map[string]string{"team": "hijacked"}
	db.Spec.Primary = "my-database-0"
	db.Status.Phase = example.DatabasePhaseDegraded
	db.Status.ReadyReplicas = 2
	db.Status.Primary = "my-database-1"
	db.Status.Members = []example.DatabaseMember{{Name: "my-database-1", Role: example.MemberRolePrimary, Ready: true}}

	NewStatusStrategy(newTestStrategy()).PrepareForUpdate(context.Background(), db, old)

	require.Equal(t, old.Spec, db.Spec, "spec.primary included")
	require.Equal(t, "my-database-1", db.Status.Primary, "status.primary is written here")
	require.Equal(t, []example.DatabaseMember{{Name: "my-database-1", Role: example.MemberRolePrimary, Ready: true}}, db.Status.Members)
	require.Equal(t, old.Labels, db.Labels)
	require.Equal(t, example.DatabasePhaseDegraded, db.Status.Phase, "the status change is kept")
	require.Equal(t, int32(2), db.Status.ReadyReplicas)
	require.Equal(t, old.Generation, db.Generation, "a status write never bumps generation")
}

func TestResetFieldsSplitSpecAndStatusForV1(t *testing.T) {
	tests := []struct {
		name     string
		strategy interface {
			GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set
		}
		wantReset []fieldpath.Path
		wantKept  []fieldpath.Path
	}{
		{
			name:      "main resource resets status",
			strategy:  newTestStrategy(),
			wantReset: []fieldpath.Path{fieldpath.MakePathOrDie("status")},
			wantKept:  []fieldpath.Path{fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("metadata", "labels")},
		},
		{
			name:      "status resets spec and labels",
			strategy:  NewStatusStrategy(newTestStrategy()),
			wantReset: []fieldpath.Path{fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("metadata", "labels")},
			wantKept:  []fieldpath.Path{fieldpath.MakePathOrDie("status"), fieldpath.MakePathOrDie("metadata", "annotations")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resetFields := tc.strategy.GetResetFields()
			require.Len(t, resetFields, 1)
			set, ok := resetFields["example.com/v1"]
			require.True(t, ok, "reset fields are keyed by example.com/v1")
			for _, p := range tc.wantReset {
				require.Truef(t, set.Has(p), "%s must be reset", p)
			}
			for _, p := range tc.wantKept {
				require.Falsef(t, set.Has(p), "%s must not be reset", p)
			}
		})
	}
}

func TestSelectableFieldsAreTheFieldLabelsV1Accepts(t *testing.T) {
	db := storedDatabase()
	db.Status.Phase = example.DatabasePhaseProvisioning

	require.Equal(t, fields.Set{
		"metadata.name":      "my-database",
		"metadata.namespace": "production",
		"spec.engine":        "postgresql",
		"spec.version":       "14.5",
		"status.phase":       "Provisioning",
	}, SelectableFields(db))
}

func TestGetAttrsReturnsLabelsAndFields(t *testing.T) {
	db := storedDatabase()
	gotLabels, gotFields, err := GetAttrs(db)
	require.NoError(t, err)
	require.Equal(t, labels.Set{"team": "payments"}, gotLabels)
	require.Equal(t, SelectableFields(db), gotFields)
}

func TestGetAttrsRefusesOtherObjects(t *testing.T) {
	_, _, err := GetAttrs(&example.DatabaseList{})
	require.ErrorContains(t, err, "not a Database")
}

func TestMatchDatabaseSelectsOnLabelsAndFields(t *testing.T) {
	mysql := storedDatabase()
	mysql.Spec.Engine = example.EngineMySQL
	postgres := storedDatabase()

	tests := []struct {
		name  string
		label labels.Selector
		field fields.Selector
		obj   *example.Database
		want  bool
	}{
		{"engine matches", labels.Everything(), fields.OneTermEqualSelector("spec.engine", "mysql"), mysql, true},
		{"engine differs", labels.Everything(), fields.OneTermEqualSelector("spec.engine", "mysql"), postgres, false},
		{"phase matches", labels.Everything(), fields.OneTermEqualSelector("status.phase", "Ready"), postgres, true},
		{"version differs", labels.Everything(), fields.OneTermEqualSelector("spec.version", "16.1"), postgres, false},
		{"name matches", labels.Everything(), fields.OneTermEqualSelector("metadata.name", "my-database"), postgres, true},
		{"label matches", labels.SelectorFromSet(labels.Set{"team": "payments"}), fields.Everything(), postgres, true},
		{"label differs", labels.SelectorFromSet(labels.Set{"team": "orders"}), fields.Everything(), postgres, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			predicate := MatchDatabase(tc.label, tc.field)
			got, err := predicate.Matches(tc.obj)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestValidateDelegatesToValidation(t *testing.T) {
	s := newTestStrategy()
	valid := exampleDatabase()
	require.Empty(t, s.Validate(context.Background(), valid), "the example Database must be valid")

	invalid := exampleDatabase()
	invalid.Spec.Engine = "oracle"
	errs := s.Validate(context.Background(), invalid)
	require.NotEmpty(t, errs)
	require.Equal(t, "spec.engine", errs[0].Field)
}

func TestValidateUpdateDelegatesToValidation(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(*example.Database)
		wantField string
	}{
		{"replicas within bounds", func(db *example.Database) { db.Spec.Replicas = ptr.To[int32](5) }, ""},
		{"engine is immutable", func(db *example.Database) { db.Spec.Engine = example.EngineMySQL }, "spec.engine"},
		{"storage never shrinks", func(db *example.Database) { db.Spec.Storage = "50Gi" }, "spec.storage"},
		{"replicas over the maximum", func(db *example.Database) { db.Spec.Replicas = ptr.To[int32](11) }, "spec.replicas"},
		{"primary not one of the Pods", func(db *example.Database) { db.Spec.Primary = "my-database-3" }, "spec.primary"},
		{"scale-down removing the named primary", func(db *example.Database) { db.Spec.Replicas = ptr.To[int32](2) }, "spec.primary"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := storedDatabase()
			db := old.DeepCopy()
			tc.mutate(db)

			errs := newTestStrategy().ValidateUpdate(context.Background(), db, old)

			if tc.wantField == "" {
				require.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs)
			fieldsWithErrors := make([]string, 0, len(errs))
			for _, e := range errs {
				fieldsWithErrors = append(fieldsWithErrors, e.Field)
			}
			require.Contains(t, fieldsWithErrors, tc.wantField)
		})
	}
}

func TestStatusValidateUpdateDelegatesToStatusValidation(t *testing.T) {
	old := storedDatabase()
	db := old.DeepCopy()
	db.Status.ReadyReplicas = 2
	require.Empty(t, NewStatusStrategy(newTestStrategy()).ValidateUpdate(context.Background(), db, old))

	db.Status.ReadyReplicas = -1
	require.NotEmpty(t, NewStatusStrategy(newTestStrategy()).ValidateUpdate(context.Background(), db, old),
		"a negative readyReplicas is refused by the status validation")
}

func TestNoWarningsForTheExample(t *testing.T) {
	s := newTestStrategy()
	ctx := context.Background()
	require.Nil(t, s.WarningsOnCreate(ctx, exampleDatabase()))
	require.Nil(t, s.WarningsOnUpdate(ctx, exampleDatabase(), exampleDatabase()))
	require.Nil(t, NewStatusStrategy(s).WarningsOnUpdate(ctx, exampleDatabase(), exampleDatabase()))
}

// A MongoDB replica set of an even number of members, or of more than can vote, is warned
// about on create and when an update (a scale included) sets it; an update that keeps it is
// not warned about again, nor is a status write, nor an odd number of members.
func TestWarningsForMongoDBReplicaSetsThatElectPoorly(t *testing.T) {
	s := newTestStrategy()
	ctx := context.Background()
	mongo := func(replicas int32) *example.Database {
		db := exampleDatabase()
		db.Spec.Engine, db.Spec.Version, db.Spec.Replicas = example.EngineMongoDB, "7.0", &replicas
		return db
	}
	const even = "spec.replicas: a MongoDB replica set of 2 voting members elects its primary by a majority of 2, " +
		"so it survives the loss of 0 members, no more than 1 would: use an odd number"
	require.Equal(t, []string{even}, s.WarningsOnCreate(ctx, mongo(2)))
	require.Nil(t, s.WarningsOnCreate(ctx, mongo(1)))
	require.Nil(t, s.WarningsOnCreate(ctx, mongo(3)))
	require.Equal(t, []string{even}, s.WarningsOnUpdate(ctx, mongo(2), mongo(3)))
	require.Nil(t, s.WarningsOnUpdate(ctx, mongo(2), mongo(2)))
	require.Nil(t, NewStatusStrategy(s).WarningsOnUpdate(ctx, mongo(2), mongo(1)))
	require.Equal(t, []string{"spec.replicas: a MongoDB replica set has at most 7 voting members: the other 3 neither vote nor become primary"},
		s.WarningsOnCreate(ctx, mongo(10)), "7 voters, an odd number")

	pg := mongo(2)
	pg.Spec.Engine, pg.Spec.Version = example.EnginePostgreSQL, "16"
	require.Nil(t, s.WarningsOnCreate(ctx, pg), "the controller, not a vote, picks a PostgreSQL primary")
}
