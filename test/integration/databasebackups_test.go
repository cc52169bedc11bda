package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// databasebackups is served from the stores alone: listed in discovery with get, list and
// delete; an empty list where no Database names a store; a store that cannot be read (here:
// the server has no kube-apiserver to read its Secret from) a warning on list that names the
// Database and the Secret, and a 503 on get; never a watch or a create; field selectors
// metadata.name, metadata.namespace and database only.
func TestDatabaseBackupsFromTheStores(t *testing.T) {
	ctx := context.Background()
	const ns = "backups-served"

	resp := do(t, http.MethodGet, "/apis/example.com/v1", nil, nil)
	require.Equal(t, http.StatusOK, resp.code, "%s", resp.body)
	require.Contains(t, string(resp.body), `"name":"databasebackups","singularName":"databasebackup","namespaced":true,"kind":"DatabaseBackup","verbs":["delete","get","list"],"shortNames":["dbbackup"]`)

	client, warnings := clientFor(t)
	list, err := client.ExampleV1().DatabaseBackups(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items)
	require.Empty(t, warnings.all())

	resp = do(t, http.MethodPost, databasesPath(ns), breakerDatabase(ns, "ledger", breakerBackup, ""), nil)
	require.Equal(t, http.StatusCreated, resp.code, "%s", resp.body)
	list, err = client.ExampleV1().DatabaseBackups(ns).List(ctx, metav1.ListOptions{FieldSelector: "database=ledger"})
	require.NoError(t, err)
	require.Empty(t, list.Items)
	require.Len(t, warnings.all(), 1)
	require.Contains(t, warnings.all()[0], "the store of Database "+ns+"/ledger (bucket backups at s3.example.com:443, path /"+ns+") cannot be read: its Secret store cannot be read")

	_, err = client.ExampleV1().DatabaseBackups(ns).Get(ctx, "ledger.20261205-030041f", metav1.GetOptions{})
	require.True(t, apierrors.IsServiceUnavailable(err), "%v", err)
	require.ErrorContains(t, err, "may be in a store that cannot be read")
	_, err = client.ExampleV1().DatabaseBackups("backups-elsewhere").Get(ctx, "ledger.20261205-030041f", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	err = client.ExampleV1().DatabaseBackups("backups-elsewhere").Delete(ctx, "ledger.20261205-030041f", metav1.DeleteOptions{})
	require.True(t, apierrors.IsNotFound(err), "%v", err)

	_, err = client.ExampleV1().DatabaseBackups(ns).List(ctx, metav1.ListOptions{FieldSelector: "engine=postgresql"})
	require.True(t, apierrors.IsBadRequest(err), "%v", err)
	require.ErrorContains(t, err, "field label not supported: engine")

	path := "/apis/example.com/v1/namespaces/" + ns + "/databasebackups"
	for method, query := range map[string]string{http.MethodGet: "?watch=true", http.MethodPost: ""} {
		resp = do(t, method, path+query, []byte(`{"apiVersion":"example.com/v1","kind":"DatabaseBackup","metadata":{"name":"ledger.x"}}`), nil)
		require.Equal(t, http.StatusMethodNotAllowed, resp.code, "%s %s: %s", method, query, resp.body)
	}
	resp = do(t, http.MethodGet, path, nil, map[string]string{"Accept": "application/vnd.kubernetes.protobuf"})
	require.Equal(t, http.StatusOK, resp.code, "%s", resp.body)
	require.True(t, strings.HasPrefix(string(resp.body), "k8s\x00"), "a protobuf list: %q", resp.body)
}
