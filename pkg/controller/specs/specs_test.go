package specs_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/names"
)

func database(replicas int32) *examplev1.Database {
	return &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: "my-database", UID: "db-uid"},
		Spec: examplev1.DatabaseSpec{
			Engine: examplev1.EnginePostgreSQL, Version: "14.5", Replicas: ptr.To(replicas), Storage: "100Gi",
		},
	}
}

func TestResolveRefusesWithSentinelErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*examplev1.Database)
		is     error
		msg    string
	}{
		{"unknown engine", func(db *examplev1.Database) { db.Spec.Engine = "oracle" }, specs.ErrInvalidSpec, `spec.engine: unknown engine "oracle"`},
		{"version outside the catalog", func(db *examplev1.Database) { db.Spec.Version = "12" }, specs.ErrUnsupportedVersion, `spec.version: unsupported postgresql version "12"`},
		{"replicas not set", func(db *examplev1.Database) { db.Spec.Replicas = nil }, specs.ErrInvalidSpec, "spec.replicas: not set"},
		{"storage not set", func(db *examplev1.Database) { db.Spec.Storage = "" }, specs.ErrInvalidSpec, "spec.storage: not set"},
		{"storage of zero", func(db *examplev1.Database) { db.Spec.Storage = "0Gi" }, specs.ErrInvalidSpec, `spec.storage: storage "0Gi" must be at least 1Gi`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := database(1)
			tc.change(db)
			_, err := specs.Resolve(db)
			require.ErrorIs(t, err, tc.is)
			require.ErrorContains(t, err, tc.msg)
		})
	}
}

func TestNewChildrenBuildsEveryChildOwnedByTheDatabase(t *testing.T) {
	db := database(3)
	c, err := specs.NewChildren(db, "secret", "database-system")
	require.NoError(t, err)
	require.Equal(t, "my-database-credentials", c.Secret.Name)
	require.Equal(t, "secret", string(c.Secret.Data[names.SecretKeyPassword]))
	require.Equal(t, "my-database-headless", c.HeadlessService.Name)
	require.Equal(t, "my-database", c.ClientService.Name)
	require.Equal(t, "postgres:14.5", c.StatefulSet.Spec.Template.Spec.Containers[0].Image)
	require.NotNil(t, c.PodDisruptionBudget)
	for _, obj := range []metav1.Object{c.Secret, c.HeadlessService, c.ClientService, c.StatefulSet, c.PodDisruptionBudget} {
		require.Equal(t, []metav1.OwnerReference{specs.OwnerReference(db)}, obj.GetOwnerReferences(), obj.GetName())
		require.Equal(t, names.ManagedByValue, obj.GetLabels()[names.ManagedByLabel], obj.GetName())
	}

	one, err := specs.NewChildren(database(1), "secret", "database-system")
	require.NoError(t, err)
	require.Nil(t, one.PodDisruptionBudget, "no budget for one replica")
}

func TestDataClaimIsNamedAndLabelledAsTheStatefulSetControllerWould(t *testing.T) {
	db := database(3)
	d, err := specs.Resolve(db)
	require.NoError(t, err)
	claim := specs.DataClaim(specs.StatefulSet(db, d), 2)
	require.Equal(t, "data-my-database-2", claim.Name)
	require.Equal(t, names.DataClaimName(db, 2), claim.Name)
	require.Equal(t, "production", claim.Namespace)
	for k, v := range names.SelectorLabels(db) {
		require.Equal(t, v, claim.Labels[k], k)
	}
	require.Equal(t, []metav1.OwnerReference{specs.ClaimOwnerReference(db)}, claim.OwnerReferences)
	ordinal, ok := names.DataClaimOrdinal(db, claim.Name)
	require.True(t, ok)
	require.Equal(t, int32(2), ordinal)
}

func TestImageFromPrefixesTheRegistry(t *testing.T) {
	require.Equal(t, "postgres:15", specs.ImageFrom("", "postgres:15"))
	require.Equal(t, "registry.example:5000/mirror/postgres:15", specs.ImageFrom("registry.example:5000/mirror", "postgres:15"))
	require.Equal(t, "registry.example/postgres:15", specs.ImageFrom("registry.example/", "postgres:15"))
}
