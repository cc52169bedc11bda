package integration

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A resourceVersion that is not a revision is a 400 BadRequest "invalid resource version"
// on every read of databases: get, list and watch, and the gets of the status, scale and
// connection subresources; never a 500. A valid one still reads.
func TestAMalformedResourceVersionIsABadRequest(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	db := create(t, client, newDatabase(ns, "rv", "postgresql", "16"))
	for _, path := range []string{
		"/rv?resourceVersion=abc",
		"/rv/status?resourceVersion=abc",
		"/rv/scale?resourceVersion=abc",
		"/rv/connection?resourceVersion=abc",
		"?resourceVersion=abc",
		"?resourceVersion=-1",
		"?watch=1&resourceVersion=abc",
		"?watch=1&resourceVersion=1.5",
	} {
		resp := do(t, http.MethodGet, databasesPath(ns)+path, nil, nil)
		require.Equal(t, http.StatusBadRequest, resp.code, "%s: %s", path, resp.body)
		status := resp.status(t)
		require.Equal(t, metav1.StatusReasonBadRequest, status.Reason, path)
		require.Contains(t, status.Message, "invalid resource version: ", path)
	}
	// The create's own revision first: a get at it waits for the watch cache to reach it,
	// after which "0" (any revision the cache holds) finds the Database too.
	for _, rv := range []string{db.ResourceVersion, "0"} {
		resp := do(t, http.MethodGet, databasesPath(ns)+"/rv?resourceVersion="+rv, nil, nil)
		require.Equal(t, http.StatusOK, resp.code, "resourceVersion=%s: %s", rv, resp.body)
	}
}
