package authnready

import (
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// codecs serializes the 503's Status.
var codecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	return serializer.NewCodecFactory(scheme)
}()

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

// Until the CA is loaded, requests get a retryable 503 that closes the connection and
// /readyz fails; the health endpoints still reach the server. Once it is loaded, everything
// goes through.
func TestGateHoldsRequestsUntilTheCAIsLoaded(t *testing.T) {
	ca := &fakeCA{}
	ready := CA{CheckName: "requestheader-client-ca", What: "the front-proxy client CA", Provider: ca}
	served := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	h := ready.Gate(served, codecs)

	require.ErrorContains(t, ready.HealthCheck().Check(nil), "requestheader-client-ca-file is not loaded yet")
	require.Equal(t, "requestheader-client-ca", ready.HealthCheck().Name())

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
	require.NoError(t, ready.HealthCheck().Check(nil))
	w = serve(h, "/apis/example.com/v1/namespaces/ns/databases")
	require.Equal(t, http.StatusOK, w.Code)
	require.Empty(t, w.Header().Get("Connection"))
}

// A server that trusts no such CA is not gated.
func TestGateWithoutACA(t *testing.T) {
	served := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	ready := CA{CheckName: "requestheader-client-ca"}
	require.NoError(t, ready.Check())
	require.Equal(t, http.StatusTeapot, serve(ready.Gate(served, codecs), "/apis").Code)
}
