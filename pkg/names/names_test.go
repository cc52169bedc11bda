package names_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/names"
)

// TestNamesOfADatabase pins the child names, the Pods' selector and the DNS names of a
// Database, which the API server, the plugin, the local cluster and the controller all derive.
func TestNamesOfADatabase(t *testing.T) {
	db := &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: "my-database"},
		Spec:       examplev1.DatabaseSpec{Engine: examplev1.EnginePostgreSQL},
	}
	require.Equal(t, "my-database-credentials", names.SecretName(db))
	require.Equal(t, "my-database", names.StatefulSetName(db))
	require.Equal(t, "my-database", names.ClientServiceName(db))
	require.Equal(t, "my-database-read", names.ReadServiceName(db))
	require.Equal(t, "my-database-headless", names.HeadlessServiceName(db))
	require.Equal(t, "app.kubernetes.io/instance=my-database,app.kubernetes.io/managed-by=database-controller,app.kubernetes.io/name=postgresql",
		names.PodSelector(db))
	require.Equal(t, "production.svc.example.org", names.NamespaceDomain(db, "example.org"))
	require.Equal(t, "my-database-read.production.svc.cluster.local", names.ServiceHost(db, names.DefaultClusterDomain, names.ReadServiceName(db)))
	require.Equal(t, "my-database-1.my-database-headless.production.svc.cluster.local", names.PodHost(db, names.DefaultClusterDomain, "my-database-1"))

	got, ok := names.DatabaseOfPod(&metav1.ObjectMeta{Labels: names.SelectorLabels(db)})
	require.True(t, ok)
	require.Equal(t, "my-database", got)
	for _, l := range []map[string]string{
		nil,
		{names.InstanceLabel: "my-database"},
		{names.InstanceLabel: "my-database", names.ManagedByLabel: "helm"},
		{names.InstanceLabel: "", names.ManagedByLabel: names.ManagedByValue},
	} {
		_, ok := names.DatabaseOfPod(&metav1.ObjectMeta{Labels: l})
		require.False(t, ok, "%v", l)
	}
}

// A data claim's name gives its Database and ordinal back only in the StatefulSet
// controller's form "data-<database>-<ordinal>".
func TestDataClaimNames(t *testing.T) {
	db := &examplev1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: "a-b"}}
	require.Equal(t, "data-a-b-3", names.DataClaimName(db, 3))
	ordinal, ok := names.DataClaimOrdinal(db, "data-a-b-3")
	require.True(t, ok)
	require.Equal(t, int32(3), ordinal)
	database, ordinal, ok := names.ParseDataClaimName("data-a-b-0")
	require.True(t, ok)
	require.Equal(t, "a-b", database)
	require.Equal(t, int32(0), ordinal)
	for _, claim := range []string{"data-a-3", "data-a-b-c-3", "data-a-b-03", "data-a-b--1", "data-a-b-", "data--3", "logs-a-b-3", "data-a-b-2147483648"} {
		_, ok := names.DataClaimOrdinal(db, claim)
		require.False(t, ok, claim)
	}
}
