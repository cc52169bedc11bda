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
