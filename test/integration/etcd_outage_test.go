package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/generated/clientset/versioned"
	"example.com/database-apiserver/test/integration/framework"
)

// While etcd is stopped, writes and reads of the latest state are answered
// by the storage with a 503 ServiceUnavailable and Retry-After (which clients
// retry), not a 500 or the 504 of a request that hung until the server's
// request timeout (a minute); once etcd is back, the same server writes again
// and finds what it stored before. How long each answer took is logged.
func TestEtcdOutageIsServiceUnavailable(t *testing.T) {
	s, err := framework.Start()
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	client, err := versioned.NewForConfig(s.ClientConfig)
	require.NoError(t, err)
	dbs := client.ExampleV1().Databases("outage")
	ctx := context.Background()
	before, err := dbs.Create(ctx, newDatabase("outage", "before", examplev1.EnginePostgreSQL, "16"), metav1.CreateOptions{})
	require.NoError(t, err)
	updated := before.DeepCopy()
	updated.Spec.Replicas = new(int32(2))
	update, err := json.Marshal(updated)
	require.NoError(t, err)

	// Raw HTTP, one attempt each: client-go would retry a 503 with Retry-After. The give-up
	// bound is past the server's request timeout, whose own 504 the checks tell apart.
	httpClient, err := rest.HTTPClientFor(s.ClientConfig)
	require.NoError(t, err)
	send := func(method, path string, body []byte, contentType string) (*http.Response, []byte) {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, s.ClientConfig.Host+path, bytes.NewReader(body))
		require.NoError(t, err)
		if body != nil {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := httpClient.Do(req)
		require.NoError(t, err, "%s %s", method, path)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, data
	}

	s.StopEtcd()
	path := databasesPath("outage")
	for _, tc := range []struct {
		method, path string
		body         []byte
		contentType  string
	}{
		{http.MethodPost, path, []byte(`{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"during"},"spec":{"engine":"mysql","version":"8.4"}}`), "application/json"},
		{http.MethodPut, path + "/before", update, "application/json"},
		{http.MethodPatch, path + "/before", []byte(`{"spec":{"replicas":3}}`), "application/merge-patch+json"},
		{http.MethodPatch, path + "/before/status", []byte(`{"status":{"phase":"Ready"}}`), "application/merge-patch+json"},
		{http.MethodDelete, path + "/before", nil, ""},
		{http.MethodGet, path + "/before", nil, ""},
		{http.MethodGet, path, nil, ""},
	} {
		started := time.Now()
		resp, body := send(tc.method, tc.path, tc.body, tc.contentType)
		took := time.Since(started)
		t.Logf("%s %s took %v", tc.method, tc.path, took)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s %s after %v: %s", tc.method, tc.path, took, body)
		require.Equal(t, "1", resp.Header.Get("Retry-After"), "%s %s", tc.method, tc.path)
		var status metav1.Status
		require.NoError(t, json.Unmarshal(body, &status), "%s", body)
		require.Equal(t, metav1.StatusReasonServiceUnavailable, status.Reason)
		require.Contains(t, status.Message, "the storage of databases.example.com is unavailable")
	}

	require.NoError(t, s.StartEtcd())
	// client-go retries the 503s until etcd is back.
	require.Eventually(t, func() bool {
		_, err := dbs.Create(ctx, newDatabase("outage", "after", examplev1.EnginePostgreSQL, "16"), metav1.CreateOptions{})
		return err == nil
	}, time.Minute, 250*time.Millisecond)
	got, err := dbs.Get(ctx, "before", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, before.UID, got.UID)
	require.Equal(t, int32(1), *got.Spec.Replicas, "no write of the outage was stored")
	_, err = dbs.Get(ctx, "during", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "no write of the outage was stored: %v", err)

	// etcd lost right after writes succeeded: the next write is answered by the storage, a
	// 503 (refused before it reached etcd) or a 504 (cancelled in flight once the health
	// check failed, maybe applied), both with Retry-After.
	s.StopEtcd()
	started := time.Now()
	resp, body := send(http.MethodPost, path, []byte(`{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"lost"},"spec":{"engine":"mysql","version":"8.4"}}`), "application/json")
	took := time.Since(started)
	t.Logf("POST right after etcd stopped took %v: %d", took, resp.StatusCode)
	require.Contains(t, []int{http.StatusServiceUnavailable, http.StatusGatewayTimeout}, resp.StatusCode, "%s", body)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	var status metav1.Status
	require.NoError(t, json.Unmarshal(body, &status), "%s", body)
	require.Contains(t, status.Message, "the storage of databases.example.com ")
}
