package apiserver

import (
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// fakeCA is a CA provider whose content the test sets, as the ConfigMap
// controller sets it once its informer has synced.
type fakeCA struct{ content atomic.Pointer[[]byte] }

var _ dynamiccertificates.CAContentProvider = &fakeCA{}

func (f *fakeCA) Name() string {
	return "client-ca::kube-system::extension-apiserver-authentication::requestheader-client-ca-file"
}
func (f *fakeCA) CurrentCABundleContent() []byte {
	if b := f.content.Load(); b != nil {
		return *b
	}
	return nil
}
func (f *fakeCA) VerifyOptions() (x509.VerifyOptions, bool) { return x509.VerifyOptions{}, false }
func (f *fakeCA) AddListener(dynamiccertificates.Listener)  {}
func (f *fakeCA) load(pem string)                           { b := []byte(pem); f.content.Store(&b) }
func serve(h http.Handler, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w
}

// Until the front-proxy CA is loaded, API requests get a retryable 503 that
// closes the connection and /readyz fails; the health endpoints still reach
// the server. Once it is loaded, everything goes through.
func TestRequestHeaderCAGate(t *testing.T) {
	ca := &fakeCA{}
	ready := requestHeaderCAReady{ca: ca}
	served := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	h := withRequestHeaderCAReady(served, ready, Codecs)

	require.ErrorContains(t, ready.healthCheck().Check(nil), "requestheader-client-ca-file is not loaded yet")
	require.Equal(t, RequestHeaderCACheckName, ready.healthCheck().Name())

	w := serve(h, "/apis/example.com/v1/namespaces/ns/databases")
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	require.Equal(t, "close", w.Header().Get("Connection"))
	var status metav1.Status
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &status), w.Body.String())
	require.Equal(t, metav1.StatusReasonServiceUnavailable, status.Reason)
	require.Contains(t, status.Message, "cannot authenticate requests yet")
	require.Equal(t, int32(1), status.Details.RetryAfterSeconds)

	for _, path := range []string{"/readyz", "/readyz/etcd", "/livez", "/healthz"} {
		require.Equal(t, http.StatusOK, serve(h, path).Code, path)
	}
	require.Equal(t, http.StatusServiceUnavailable, serve(h, "/readyzz").Code)

	ca.load("-----BEGIN CERTIFICATE-----")
	require.NoError(t, ready.healthCheck().Check(nil))
	w = serve(h, "/apis/example.com/v1/namespaces/ns/databases")
	require.Equal(t, http.StatusOK, w.Code)
	require.Empty(t, w.Header().Get("Connection"))
}

// A server that trusts no front proxy is not gated.
func TestRequestHeaderCAGateWithoutRequestHeader(t *testing.T) {
	served := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	ready := requestHeaderCAReady{}
	require.NoError(t, ready.check())
	require.Equal(t, http.StatusTeapot, serve(withRequestHeaderCAReady(served, ready, Codecs), "/apis").Code)
}

// The options end watches on shutdown by default, so a server behind
// kube-apiserver stops in about a second rather than --request-timeout.
func TestDefaultShutdownWatchTerminationGracePeriod(t *testing.T) {
	o := NewOptions(nil, nil)
	require.Equal(t, DefaultShutdownWatchTerminationGracePeriod, o.ServerRun.ShutdownWatchTerminationGracePeriod)
	require.Positive(t, o.ServerRun.ShutdownWatchTerminationGracePeriod)
	fss := o.Flags()
	fs := fss.FlagSet("generic")
	require.Equal(t, DefaultShutdownWatchTerminationGracePeriod.String(), fs.Lookup("shutdown-watch-termination-grace-period").DefValue)
}
