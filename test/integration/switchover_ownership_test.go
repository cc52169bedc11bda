package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	applyv1 "example.com/database-apiserver/pkg/generated/applyconfiguration/example/v1"
	"example.com/database-apiserver/pkg/generated/clientset/versioned"
)

// switchoverReady creates, by a server-side apply as manager, the PostgreSQL Database
// name of two Pods whose spec.primary is name-0, and reports name-0 its primary and
// name-1 a caught-up replica, so a switchover to name-1 is accepted.
func switchoverReady(t *testing.T, client versioned.Interface, ns, name, manager string) (*applyv1.DatabaseApplyConfiguration, *examplev1.Database) {
	t.Helper()
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	config := applyv1.Database(name, ns).WithSpec(applyv1.DatabaseSpec().
		WithEngine(examplev1.EnginePostgreSQL).WithVersion("16").WithReplicas(2).WithStorage("10Gi").WithPrimary(name + "-0"))
	db, err := dbs.Apply(ctx, config, metav1.ApplyOptions{FieldManager: manager})
	require.NoError(t, err)
	return config, reportMembers(t, dbs, db, caughtUp(name)...)
}

// managedFieldsOf returns the managedFields entry of manager in db, nil when it has none.
func managedFieldsOf(db *examplev1.Database, manager string) *metav1.ManagedFieldsEntry {
	for i := range db.ManagedFields {
		if db.ManagedFields[i].Manager == manager {
			return &db.ManagedFields[i]
		}
	}
	return nil
}

// A switchover makes its requester the owner of spec.primary, an Update through the
// subresource "switchover" named by fieldManager: a later server-side apply by the previous
// owner that puts the old primary back is a 409 conflict naming the field and the
// switchover's manager, until it forces. The answer is otherwise what it was.
func TestSwitchoverOwnsSpecPrimary(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	gitops, db := switchoverReady(t, client, ns, "shop", "gitops")
	require.NotNil(t, managedFieldsOf(db, "gitops"))

	got, err := dbs.Switchover(ctx, "shop", &examplev1.DatabaseSwitchover{Target: "shop-1"}, metav1.CreateOptions{FieldManager: "oncall"})
	require.NoError(t, err)
	require.Equal(t, "shop-1", got.Spec.Primary)
	require.Equal(t, db.Generation+1, got.Generation)
	require.Equal(t, user.APIServerUser, got.Status.Switchover.RequestedBy)
	require.Equal(t, "shop-1", got.Status.Switchover.Target)
	require.Equal(t, db.Status.Members, got.Status.Members)
	entry := managedFieldsOf(got, "oncall")
	require.NotNil(t, entry, "managedFields: %+v", got.ManagedFields)
	require.Equal(t, metav1.ManagedFieldsOperationUpdate, entry.Operation)
	require.Equal(t, "switchover", entry.Subresource)
	require.Equal(t, "example.com/v1", entry.APIVersion)
	require.NotNil(t, entry.Time)
	require.JSONEq(t, `{"f:spec":{"f:primary":{}}}`, string(entry.FieldsV1.Raw), "the requester owns spec.primary, not the server's record in status")
	require.NotContains(t, string(managedFieldsOf(got, "gitops").FieldsV1.Raw), `"f:primary"`, "gitops no longer owns spec.primary")
	stored, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, got.ManagedFields, stored.ManagedFields, "the ownership is stored")

	_, err = dbs.Apply(ctx, gitops, metav1.ApplyOptions{FieldManager: "gitops"})
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	require.ErrorContains(t, err, `conflict with "oncall" with subresource "switchover"`)
	require.ErrorContains(t, err, ".spec.primary")
	unchanged, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, stored.ResourceVersion, unchanged.ResourceVersion, "the conflict changed nothing")

	forced, err := dbs.Apply(ctx, gitops, metav1.ApplyOptions{FieldManager: "gitops", Force: true})
	require.NoError(t, err)
	require.Equal(t, "shop-0", forced.Spec.Primary)
	require.Nil(t, managedFieldsOf(forced, "oncall"), "oncall owned nothing else")
}

// A switchover without fieldManager is recorded under the User-Agent up to its first "/",
// as k8s.io/apiserver names the manager of any write; a dry run records nothing.
func TestSwitchoverManagerDefaultsToTheUserAgent(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	_, db := switchoverReady(t, client, ns, "orders", "gitops")

	body := []byte(`{"apiVersion":"example.com/v1","kind":"DatabaseSwitchover","target":"orders-1"}`)
	dry := do(t, http.MethodPost, databasesPath(ns)+"/orders/switchover?dryRun=All", body, map[string]string{"User-Agent": "ops-console/1.4 (linux/amd64)"})
	require.Equal(t, http.StatusCreated, dry.code, "%s", dry.body)
	stored, err := client.ExampleV1().Databases(ns).Get(context.Background(), "orders", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, db.ResourceVersion, stored.ResourceVersion)
	require.Nil(t, managedFieldsOf(stored, "ops-console"))

	resp := do(t, http.MethodPost, databasesPath(ns)+"/orders/switchover", body, map[string]string{"User-Agent": "ops-console/1.4 (linux/amd64)"})
	require.Equal(t, http.StatusCreated, resp.code, "%s", resp.body)
	var got examplev1.Database
	require.NoError(t, json.Unmarshal(resp.body, &got))
	require.Equal(t, "orders-1", got.Spec.Primary)
	entry := managedFieldsOf(&got, "ops-console")
	require.NotNil(t, entry, "managedFields: %+v", got.ManagedFields)
	require.Equal(t, "switchover", entry.Subresource)
	require.JSONEq(t, `{"f:spec":{"f:primary":{}}}`, string(entry.FieldsV1.Raw))
}
