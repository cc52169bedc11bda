package database

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// fakeAPI stands in for kube-apiserver: it answers the requests it has a response for by
// method and path, 404 to the others, and records every request.
type fakeAPI struct {
	t      *testing.T
	server *httptest.Server

	mu        sync.Mutex
	responses map[string]fakeResponse
	requests  []fakeRequest
}

type fakeResponse struct {
	code int
	body any
}

type fakeRequest struct {
	Method      string
	Path        string
	Query       string
	ContentType string
	Body        []byte
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{t: t, responses: map[string]fakeResponse{}}
	f.server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.server.Close)
	return f
}

// on answers method path with code and body (JSON-encoded).
func (f *fakeAPI) on(method, path string, code int, body any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.responses[method+" "+path] = fakeResponse{code: code, body: body}
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	require.NoError(f.t, err)
	f.mu.Lock()
	f.requests = append(f.requests, fakeRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, ContentType: r.Header.Get("Content-Type"), Body: body})
	resp, ok := f.responses[r.Method+" "+r.URL.Path]
	f.mu.Unlock()
	if !ok {
		resp = fakeResponse{code: http.StatusNotFound, body: status(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")}
	}
	if text, ok := resp.body.(plainText); ok {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(resp.code)
		_, err := io.WriteString(w, string(text))
		require.NoError(f.t, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.code)
	require.NoError(f.t, json.NewEncoder(w).Encode(resp.body))
}

// plainText is a response body sent as text/plain, as an HTTP server that is no API server
// (Go's "404 page not found") answers.
type plainText string

// request is the one recorded request to method path; the test fails when there is not
// exactly one.
func (f *fakeAPI) request(method, path string) fakeRequest {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var found []fakeRequest
	for _, r := range f.requests {
		if r.Method == method && r.Path == path {
			found = append(found, r)
		}
	}
	require.Len(f.t, found, 1, "requests to %s %s among %v", method, path, f.requests)
	return found[0]
}

// paths are the method and path of every request, in order.
func (f *fakeAPI) paths() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.requests))
	for _, r := range f.requests {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

// kubeconfig writes a kubeconfig whose current context uses the fake API in namespace ns,
// and whose context "team-b" uses it in namespace team-b.
func (f *fakeAPI) kubeconfig(ns string) string {
	f.t.Helper()
	path := filepath.Join(f.t.TempDir(), "kubeconfig")
	cfg := strings.Join([]string{
		"apiVersion: v1",
		"kind: Config",
		"clusters:",
		"- name: fake",
		"  cluster:",
		"    server: " + f.server.URL,
		"users:",
		"- name: someone",
		"  user:",
		"    token: some-token",
		"contexts:",
		"- name: fake",
		"  context:",
		"    cluster: fake",
		"    user: someone",
		"    namespace: " + ns,
		"- name: team-b",
		"  context:",
		"    cluster: fake",
		"    user: someone",
		"    namespace: team-b",
		"current-context: fake",
		"",
	}, "\n")
	require.NoError(f.t, os.WriteFile(path, []byte(cfg), 0o600))
	return path
}

// run runs the plugin with args against the fake API (the kubeconfig's namespace
// "default") and returns its exit code, standard output and standard error.
func (f *fakeAPI) run(args ...string) (int, string, string) {
	f.t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	code := run(append([]string{"--kubeconfig", f.kubeconfig("default")}, args...), streams, func() time.Time { return testNow })
	return code, out.String(), errOut.String()
}

// testNow is the plugin's clock in the tests.
var testNow = time.Date(2026, time.March, 4, 12, 0, 0, 0, time.UTC)

// status is the metav1.Status an API server answers a refused request with.
func status(code int32, reason metav1.StatusReason, message string) *metav1.Status {
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   reason,
		Code:     code,
	}
}
