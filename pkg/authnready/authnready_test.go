package authnready

import (
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"example.com/database-apiserver/internal/pki"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/server"
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
type fakeCA struct {
	key     string // the ConfigMap's key: client-ca-file, requestheader-client-ca-file
	content atomic.Pointer[[]byte]
}

var _ dynamiccertificates.CAContentProvider = &fakeCA{}

func (f *fakeCA) Name() string {
	return "client-ca::kube-system::extension-apiserver-authentication::" + f.key
}
func (f *fakeCA) CurrentCABundleContent() []byte {
	if b := f.content.Load(); b != nil {
		return *b
	}
	return nil
}
func (f *fakeCA) VerifyOptions() (x509.VerifyOptions, bool) { return x509.VerifyOptions{}, false }
func (f *fakeCA) AddListener(dynamiccertificates.Listener)  {}
func (f *fakeCA) load(pem []byte)                           { f.content.Store(&pem) }

// newCAPEM is a new CA certificate, PEM-encoded.
func newCAPEM(t *testing.T, name string) []byte {
	t.Helper()
	ca, err := pki.NewCA(pki.Template{CommonName: name, Validity: time.Hour})
	require.NoError(t, err)
	return ca.CertPEM()
}
func serve(h http.Handler, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w
}

// Until the CA is loaded, requests get a retryable 503 that closes the connection and
// /readyz fails; the health endpoints still reach the server. Once it is loaded, everything
// goes through.
func TestGateHoldsRequestsUntilTheCAIsLoaded(t *testing.T) {
	ca := &fakeCA{key: "requestheader-client-ca-file"}
	ready := FrontProxyCA("requestheader-client-ca", &server.AuthenticationInfo{
		RequestHeaderConfig: &authenticatorfactory.RequestHeaderConfig{CAContentProvider: ca}})
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

	ca.load(newCAPEM(t, "front-proxy-ca"))
	require.NoError(t, ready.HealthCheck().Check(nil))
	w = serve(h, "/apis/example.com/v1/namespaces/ns/databases")
	require.Equal(t, http.StatusOK, w.Code)
	require.Empty(t, w.Header().Get("Connection"))
}

// A server that trusts no such CA is not gated.
func TestGateWithoutACA(t *testing.T) {
	served := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for name, ready := range map[string]*CA{
		"no front-proxy CA": FrontProxyCA("requestheader-client-ca", &server.AuthenticationInfo{}),
		"no client CA":      ClientCA("client-ca", &server.SecureServingInfo{}, &server.AuthenticationInfo{}),
	} {
		require.NoError(t, ready.Check(), name)
		require.Equal(t, http.StatusTeapot, serve(ready.Gate(served, codecs), "/apis").Code, name)
	}
}

// delegated sets up serving and authn as DelegatingAuthenticationOptions.ApplyTo does with
// the client CA and the front-proxy CA given (either may be nil): the client CA first, then
// the front-proxy CA, each added to the CA the TLS configuration offers.
func delegated(t *testing.T, client, frontProxy dynamiccertificates.CAContentProvider) (*server.SecureServingInfo, *server.AuthenticationInfo) {
	t.Helper()
	serving, authn := &server.SecureServingInfo{}, &server.AuthenticationInfo{}
	if client != nil {
		require.NoError(t, authn.ApplyClientCert(client, serving))
	}
	if frontProxy != nil {
		authn.RequestHeaderConfig = &authenticatorfactory.RequestHeaderConfig{CAContentProvider: frontProxy}
		require.NoError(t, authn.ApplyClientCert(frontProxy, serving))
	}
	return serving, authn
}

// The client CA and the front-proxy CA load on their own: while only the front-proxy CA is,
// the TLS configuration offers only it, and a client certificate would authenticate as
// system:anonymous, so the client CA is not ready. It is once its own part has loaded,
// even when both parts are the same certificate, and it stays ready.
func TestClientCAWaitsForTheClientCANotTheFrontProxyCA(t *testing.T) {
	client := &fakeCA{key: "client-ca-file"}
	frontProxy := &fakeCA{key: "requestheader-client-ca-file"}
	serving, authn := delegated(t, client, frontProxy)
	ready := ClientCA("client-ca", serving, authn)

	require.ErrorContains(t, ready.Check(), "the client CA")
	frontProxy.load(newCAPEM(t, "front-proxy-ca"))
	require.ErrorContains(t, ready.Check(), "is not loaded yet")
	require.Equal(t, http.StatusServiceUnavailable,
		serve(ready.Gate(http.NotFoundHandler(), codecs), "/metrics").Code)
	client.load(newCAPEM(t, "client-ca"))
	require.NoError(t, ready.Check())
	client.content.Store(nil)
	require.NoError(t, ready.Check(), "once loaded, a CA stays loaded")

	same := newCAPEM(t, "one-ca")
	client, frontProxy = &fakeCA{key: "client-ca-file"}, &fakeCA{key: "requestheader-client-ca-file"}
	serving, authn = delegated(t, client, frontProxy)
	ready = ClientCA("client-ca", serving, authn)
	frontProxy.load(same)
	require.Error(t, ready.Check())
	client.load(same)
	require.NoError(t, ready.Check())
}

// A client CA alone is waited for; a front-proxy CA alone is not the client CA.
func TestClientCAAlone(t *testing.T) {
	client := &fakeCA{key: "client-ca-file"}
	serving, authn := delegated(t, client, nil)
	ready := ClientCA("client-ca", serving, authn)
	require.Error(t, ready.Check())
	client.load(newCAPEM(t, "client-ca"))
	require.NoError(t, ready.Check())

	serving, authn = delegated(t, nil, &fakeCA{key: "requestheader-client-ca-file"})
	require.NoError(t, ClientCA("client-ca", serving, authn).Check())
}

// rotatingCA is a front-proxy CA that rotates in a second certificate right after its
// first read.
type rotatingCA struct {
	fakeCA
	reads      atomic.Int32
	old, after []byte
}

func (f *rotatingCA) CurrentCABundleContent() []byte {
	if f.reads.Add(1) == 1 {
		return f.old
	}
	return f.after
}

// A front-proxy CA that gains a certificate while the client CA's is counted does not make
// the client CA look loaded.
func TestClientCAIsNotFooledByAFrontProxyRotation(t *testing.T) {
	old := newCAPEM(t, "front-proxy-ca")
	frontProxy := &rotatingCA{fakeCA: fakeCA{key: "requestheader-client-ca-file"},
		old: old, after: append(append([]byte{}, old...), newCAPEM(t, "front-proxy-ca-2")...)}
	serving, authn := delegated(t, &fakeCA{key: "client-ca-file"}, frontProxy)
	ready := ClientCA("client-ca", serving, authn)
	require.Error(t, ready.Check())
	require.Error(t, ready.Check())
}
