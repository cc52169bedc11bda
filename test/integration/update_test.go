package integration

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	applyv1 "example.com/database-apiserver/pkg/generated/applyconfiguration/example/v1"
)

func TestEngineChangeIsRefused(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	db := create(t, client, newDatabase(ns, "immutable", examplev1.EnginePostgreSQL, "16"))

	db.Spec.Engine = examplev1.EngineMySQL
	db.Spec.Version = "8.4"
	_, err := client.ExampleV1().Databases(ns).Update(context.Background(), db, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	require.ErrorContains(t, err, "spec.engine")
	require.ErrorContains(t, err, "engine type is immutable")
}

func TestScaleSubresourceReadsAndWritesSpecReplicas(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	db := newDatabase(ns, "scaled", examplev1.EnginePostgreSQL, "16")
	db.Spec.Replicas = ptrInt32(3)
	created := create(t, client, db)
	dbs := client.ExampleV1().Databases(ns)

	scale, err := dbs.GetScale(ctx, "scaled", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(3), scale.Spec.Replicas)

	scale.Spec.Replicas = 5
	_, err = dbs.UpdateScale(ctx, "scaled", scale, metav1.UpdateOptions{})
	require.NoError(t, err)
	got, err := dbs.Get(ctx, "scaled", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(5), *got.Spec.Replicas)
	require.Equal(t, int64(2), got.Generation, "a scale is a spec change")

	scale, err = dbs.GetScale(ctx, "scaled", metav1.GetOptions{})
	require.NoError(t, err)
	scale.Spec.Replicas = 11
	_, err = dbs.UpdateScale(ctx, "scaled", scale, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	require.ErrorContains(t, err, "spec.replicas")
	got, err = dbs.Get(ctx, "scaled", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(5), *got.Spec.Replicas)

	// A stale scale write conflicts instead of overwriting.
	stale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: ns, ResourceVersion: created.ResourceVersion}, Spec: autoscalingv1.ScaleSpec{Replicas: 2}}
	_, err = dbs.UpdateScale(ctx, "scaled", stale, metav1.UpdateOptions{})
	require.True(t, apierrors.IsConflict(err), "got %v", err)
}

func TestStatusAndSpecAreWrittenOnlyThroughTheirOwnEndpoints(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)

	db := newDatabase(ns, "split", examplev1.EngineMongoDB, "8.0")
	db.Status.Phase = examplev1.DatabasePhaseReady
	db = create(t, client, db)
	require.Empty(t, db.Status.Phase, "status on create is dropped")
	require.Equal(t, int64(1), db.Generation)

	// Status through the main resource is ignored, and does not bump generation.
	db.Status.Phase = examplev1.DatabasePhaseReady
	db.Labels = map[string]string{"team": "a"}
	db, err := dbs.Update(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Empty(t, db.Status.Phase)
	require.Equal(t, int64(1), db.Generation, "metadata-only change keeps generation")

	// Spec through /status is ignored; status is stored.
	db.Spec.Replicas = ptrInt32(7)
	db.Status = examplev1.DatabaseStatus{
		Phase:              examplev1.DatabasePhaseProvisioning,
		ReadyReplicas:      1,
		ObservedGeneration: db.Generation,
		Selector:           "app.kubernetes.io/instance=split",
		Conditions: []metav1.Condition{{
			Type: "Ready", Status: metav1.ConditionFalse, Reason: "Provisioning", Message: "0 of 1 ready",
			LastTransitionTime: metav1.Now(), ObservedGeneration: db.Generation,
		}},
	}
	db, err = dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(1), *db.Spec.Replicas, "spec written through /status is ignored")
	require.Equal(t, examplev1.DatabasePhaseProvisioning, db.Status.Phase)
	require.Equal(t, int64(1), db.Generation, "status change keeps generation")
	require.Equal(t, int64(1), db.Status.ObservedGeneration)

	// A spec change bumps generation and leaves status (and so observedGeneration) behind.
	db.Spec.Replicas = ptrInt32(2)
	db, err = dbs.Update(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(2), db.Generation)
	require.Equal(t, int64(1), db.Status.ObservedGeneration)
	require.Equal(t, examplev1.DatabasePhaseProvisioning, db.Status.Phase, "main resource keeps status")

	// Invalid status is refused with the field path.
	db.Status.Phase = "Sleeping"
	_, err = dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	require.ErrorContains(t, err, "status.phase")
}

func TestVersionCatalogAllowsOnlySafeInPlaceChanges(t *testing.T) {
	cases := []struct {
		engine     examplev1.Engine
		from, to   string
		allowed    bool
		wantReason string
	}{
		{examplev1.EnginePostgreSQL, "16.2", "16.4", true, ""},
		{examplev1.EnginePostgreSQL, "16.4", "16.2", false, "downgrade"},
		{examplev1.EnginePostgreSQL, "16", "17", false, "pg_upgrade"},
		{examplev1.EngineMySQL, "8.0", "8.4", true, ""},
		{examplev1.EngineMySQL, "8.4", "9.1", true, ""},
		{examplev1.EngineMySQL, "8.0", "9.1", false, "8.4"},
		{examplev1.EngineMongoDB, "7.0", "8.0", false, "featureCompatibilityVersion"},
		{examplev1.EngineMongoDB, "7.0.2", "7.0.5", true, ""},
	}
	client, _ := clientFor(t)
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(string(tc.engine)+" "+tc.from+" to "+tc.to, func(t *testing.T) {
			ns := namespace(t)
			db := create(t, client, newDatabase(ns, "upgrade", tc.engine, tc.from))
			db.Spec.Version = tc.to
			_, err := client.ExampleV1().Databases(ns).Update(ctx, db, metav1.UpdateOptions{})
			if tc.allowed {
				require.NoError(t, err)
				return
			}
			require.True(t, apierrors.IsInvalid(err), "got %v", err)
			require.ErrorContains(t, err, "spec.version")
			require.ErrorContains(t, err, tc.wantReason)
		})
	}
}

func TestStorageMayGrowButNotShrink(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	db := newDatabase(ns, "disk", examplev1.EngineMySQL, "8.4")
	db.Spec.Storage = "100Gi"
	db = create(t, client, db)

	db.Spec.Storage = "50Gi"
	_, err := client.ExampleV1().Databases(ns).Update(ctx, db, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	require.ErrorContains(t, err, "spec.storage")

	db.Spec.Storage = "200Gi"
	_, err = client.ExampleV1().Databases(ns).Update(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func TestEndOfLifeVersionIsAcceptedWithAWarning(t *testing.T) {
	client, warnings := clientFor(t)
	ns := namespace(t)
	create(t, client, newDatabase(ns, "old", examplev1.EnginePostgreSQL, "13"))
	require.NotEmpty(t, warnings.all(), "PostgreSQL 13 is past end of life")
	require.Contains(t, warnings.all()[0], "13")

	client, warnings = clientFor(t)
	create(t, client, newDatabase(ns, "current", examplev1.EnginePostgreSQL, "18"))
	require.Empty(t, warnings.all())
}

func TestStrategicMergePatchMergesConditionsByType(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	create(t, client, newDatabase(ns, "smp", examplev1.EngineMySQL, "8.4"))

	_, err := dbs.Patch(ctx, "smp", types.StrategicMergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{})
	require.NoError(t, err)

	now := metav1.Now().UTC().Format("2006-01-02T15:04:05Z")
	cond := func(typ, status string) string {
		return `{"type":"` + typ + `","status":"` + status + `","reason":"Test","message":"m","lastTransitionTime":"` + now + `"}`
	}
	_, err = dbs.Patch(ctx, "smp", types.StrategicMergePatchType, []byte(`{"status":{"conditions":[`+cond("Ready", "False")+`]}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	got, err := dbs.Patch(ctx, "smp", types.StrategicMergePatchType, []byte(`{"status":{"conditions":[`+cond("Progressing", "True")+`]}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)

	require.Equal(t, int32(3), *got.Spec.Replicas)
	require.Len(t, got.Status.Conditions, 2, "conditions merge by type instead of replacing the list")
	require.NotNil(t, meta.FindStatusCondition(got.Status.Conditions, "Ready"))
	require.NotNil(t, meta.FindStatusCondition(got.Status.Conditions, "Progressing"))
}

func TestServerSideApplyByTwoManagersReportsConflicts(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)

	owner := applyv1.Database("ssa", ns).WithSpec(applyv1.DatabaseSpec().
		WithEngine(examplev1.EnginePostgreSQL).WithVersion("17").WithReplicas(2).WithStorage("20Gi"))
	_, err := dbs.Apply(ctx, owner, metav1.ApplyOptions{FieldManager: "owner"})
	require.NoError(t, err)

	// Another manager taking spec.replicas conflicts with the owner...
	scaler := applyv1.Database("ssa", ns).WithSpec(applyv1.DatabaseSpec().WithReplicas(4))
	_, err = dbs.Apply(ctx, scaler, metav1.ApplyOptions{FieldManager: "scaler"})
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	require.ErrorContains(t, err, ".spec.replicas")
	require.ErrorContains(t, err, `"owner"`)

	// ...until it forces; then it owns the field.
	got, err := dbs.Apply(ctx, scaler, metav1.ApplyOptions{FieldManager: "scaler", Force: true})
	require.NoError(t, err)
	require.Equal(t, int32(4), *got.Spec.Replicas)

	// A status manager applying through /status does not fight over spec.
	status := applyv1.Database("ssa", ns).WithStatus(applyv1.DatabaseStatus().WithPhase(examplev1.DatabasePhasePending))
	got, err = dbs.ApplyStatus(ctx, status, metav1.ApplyOptions{FieldManager: "controller"})
	require.NoError(t, err)
	require.Equal(t, examplev1.DatabasePhasePending, got.Status.Phase)
	require.Equal(t, int32(4), *got.Spec.Replicas)

	var managers []string
	for _, entry := range got.ManagedFields {
		managers = append(managers, entry.Manager+"/"+entry.Subresource)
	}
	require.ElementsMatch(t, []string{"owner/", "scaler/", "controller/status"}, managers)
}

func TestUpdateOfMissingDatabaseIsNotFoundNotCreated(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	db := newDatabase(ns, "ghost", examplev1.EngineMySQL, "8.4")
	db.ResourceVersion = "1"
	_, err := client.ExampleV1().Databases(ns).Update(context.Background(), db, metav1.UpdateOptions{})
	require.True(t, apierrors.IsNotFound(err), "got %v", err)
	resp := do(t, http.MethodGet, databasesPath(ns)+"/ghost", nil, nil)
	require.Equal(t, http.StatusNotFound, resp.code)
}

// Found by probing: these once gave a 500, a 400 blaming the client for stored
// data, or a different error for -1 than for 0.
func TestRegressionsFromBadInputProbing(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)

	t.Run("create with a copied resourceVersion", func(t *testing.T) {
		resp := do(t, http.MethodPost, databasesPath(ns),
			[]byte(`{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"copied","resourceVersion":"5"},"spec":{"engine":"mysql","version":"8.4"}}`), nil)
		require.Equal(t, http.StatusCreated, resp.code, "%s", resp.body)
	})

	t.Run("status.selector the scale subresource cannot report", func(t *testing.T) {
		create(t, client, newDatabase(ns, "selector", examplev1.EngineMySQL, "8.4"))
		_, err := dbs.Patch(ctx, "selector", types.MergePatchType, []byte(`{"status":{"selector":"a!=b"}}`), metav1.PatchOptions{}, "status")
		require.True(t, apierrors.IsInvalid(err), "got %v", err)
		require.ErrorContains(t, err, "status.selector")
		_, err = dbs.GetScale(ctx, "selector", metav1.GetOptions{})
		require.NoError(t, err)
	})

	t.Run("negative scale is refused like zero", func(t *testing.T) {
		create(t, client, newDatabase(ns, "negative", examplev1.EngineMySQL, "8.4"))
		for _, replicas := range []int32{-1, 0} {
			_, err := dbs.UpdateScale(ctx, "negative", &autoscalingv1.Scale{
				ObjectMeta: metav1.ObjectMeta{Name: "negative", Namespace: ns},
				Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
			}, metav1.UpdateOptions{})
			require.True(t, apierrors.IsInvalid(err), "replicas %d: got %v", replicas, err)
			require.ErrorContains(t, err, "spec.replicas")
			require.ErrorContains(t, err, `Database.example.com "negative" is invalid`)
		}
	})

	t.Run("storage written with leading zeros is stored canonically", func(t *testing.T) {
		db := newDatabase(ns, "zeros", examplev1.EngineMySQL, "8.4")
		db.Spec.Storage = "0100Gi"
		got := create(t, client, db)
		require.Equal(t, "100Gi", got.Spec.Storage)
	})
}
