package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// response is a raw HTTP answer of the server.
type response struct {
	code   int
	header http.Header
	body   []byte
}

// status decodes the body as a metav1.Status (error responses).
func (r response) status(t *testing.T) metav1.Status {
	t.Helper()
	var s metav1.Status
	require.NoError(t, json.Unmarshal(r.body, &s), "body: %s", r.body)
	return s
}

// do sends one request straight to the server, authenticated as the
// privileged loopback user, and returns the answer whatever its code.
func do(t *testing.T, method, path string, body []byte, headers map[string]string) response {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(server.ClientConfig)
	require.NoError(t, err)
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, server.ClientConfig.Host+path, reader)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{code: resp.StatusCode, header: resp.Header, body: data}
}

func databasesPath(ns string) string {
	return "/apis/example.com/v1/namespaces/" + ns + "/databases"
}
