package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A watch of databases with a negative timeoutSeconds is a 422 Invalid ListOptions naming
// the field, the answer kube-apiserver gives the watch options it validates, before any
// stream starts; kube-apiserver v1.37.2 itself leaves this one unchecked and answers 200
// with a stream that ends at once, at times with an in-stream 500 "context deadline
// exceeded". Zero (the server's default) and a positive value still watch, and a list,
// which has no timeout to apply, ignores it as kube-apiserver does.
func TestWatchWithANegativeOrOverflowingTimeoutIsInvalid(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	create(t, client, newDatabase(ns, "w", "postgresql", "16"))
	for _, path := range []string{
		databasesPath(ns) + "?watch=1&timeoutSeconds=-1",
		databasesPath(ns) + "?watch=true&timeoutSeconds=-30&resourceVersion=0",
		databasesPath(ns) + "?watch=1&timeoutSeconds=-1&fieldSelector=metadata.name%3Dw",
		"/apis/example.com/v1/watch/namespaces/" + ns + "/databases/w?timeoutSeconds=-1",
		"/apis/example.com/v1/watch/databases?timeoutSeconds=-1",
	} {
		resp := do(t, http.MethodGet, path, nil, nil)
		require.Equal(t, http.StatusUnprocessableEntity, resp.code, "%s: %s", path, resp.body)
		status := resp.status(t)
		require.Equal(t, metav1.StatusReasonInvalid, status.Reason, path)
		require.Equal(t, "meta.k8s.io", status.Details.Group, path)
		require.Equal(t, "ListOptions", status.Details.Kind, path)
		require.Len(t, status.Details.Causes, 1, path)
		require.Equal(t, "timeoutSeconds", status.Details.Causes[0].Field, path)
		require.Contains(t, status.Message, "timeoutSeconds: Invalid value: -", path)
		require.Contains(t, status.Message, "must be greater than or equal to 0", path)
	}

	// A timeout whose nanoseconds overflow an int64 would be a negative deadline too.
	path := databasesPath(ns) + "?watch=1&timeoutSeconds=9223372037"
	tooLong := do(t, http.MethodGet, path, nil, nil)
	require.Equal(t, http.StatusUnprocessableEntity, tooLong.code, "%s: %s", path, tooLong.body)
	status := tooLong.status(t)
	require.Equal(t, metav1.StatusReasonInvalid, status.Reason)
	require.Len(t, status.Details.Causes, 1)
	require.Equal(t, "timeoutSeconds", status.Details.Causes[0].Field)
	require.Contains(t, status.Message, "must be at most 9223372036")

	// A watch from the cache's revision with a timeout of a second: the Database, then the
	// end of the stream.
	resp := do(t, http.MethodGet, databasesPath(ns)+"?watch=1&timeoutSeconds=1&resourceVersion=0", nil, nil)
	require.Equal(t, http.StatusOK, resp.code, "%s", resp.body)
	require.Equal(t, 1, strings.Count(string(resp.body), `"type":"ADDED"`), "%s", resp.body)
	require.NotContains(t, string(resp.body), `"type":"ERROR"`)

	resp = do(t, http.MethodGet, databasesPath(ns)+"?timeoutSeconds=-1", nil, nil)
	require.Equal(t, http.StatusOK, resp.code, "%s", resp.body)
	require.Contains(t, string(resp.body), `"name":"w"`)
}
