package authnready

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"example.com/database-apiserver/internal/pki"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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
	ready := FrontProxyCA("requestheader-client-ca", nil, &server.AuthenticationInfo{
		RequestHeaderConfig: &authenticatorfactory.RequestHeaderConfig{CAContentProvider: ca}})
	served := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	h := ready.Gate(served, codecs)

	require.ErrorContains(t, ready.HealthCheck().Check(httptest.NewRequest(http.MethodGet, "/readyz", nil)), "requestheader-client-ca-file is not loaded yet")
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
	require.NoError(t, ready.HealthCheck().Check(httptest.NewRequest(http.MethodGet, "/readyz", nil)))
	w = serve(h, "/apis/example.com/v1/namespaces/ns/databases")
	require.Equal(t, http.StatusOK, w.Code)
	require.Empty(t, w.Header().Get("Connection"))
}

// A server that trusts no such CA is not gated.
func TestGateWithoutACA(t *testing.T) {
	served := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for name, ready := range map[string]*CA{
		"no front-proxy CA": FrontProxyCA("requestheader-client-ca", nil, &server.AuthenticationInfo{}),
		"no client CA":      ClientCA("client-ca", &server.SecureServingInfo{}, &server.AuthenticationInfo{}, nil),
	} {
		require.NoError(t, ready.Check(context.Background()), name)
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
	ready := ClientCA("client-ca", serving, authn, nil)

	require.ErrorContains(t, ready.Check(context.Background()), "the client CA")
	frontProxy.load(newCAPEM(t, "front-proxy-ca"))
	require.ErrorContains(t, ready.Check(context.Background()), "is not loaded yet")
	require.Equal(t, http.StatusServiceUnavailable,
		serve(ready.Gate(http.NotFoundHandler(), codecs), "/metrics").Code)
	client.load(newCAPEM(t, "client-ca"))
	require.NoError(t, ready.Check(context.Background()))
	client.content.Store(nil)
	require.NoError(t, ready.Check(context.Background()), "once loaded, a CA stays loaded")

	same := newCAPEM(t, "one-ca")
	client, frontProxy = &fakeCA{key: "client-ca-file"}, &fakeCA{key: "requestheader-client-ca-file"}
	serving, authn = delegated(t, client, frontProxy)
	ready = ClientCA("client-ca", serving, authn, nil)
	frontProxy.load(same)
	require.Error(t, ready.Check(context.Background()))
	client.load(same)
	require.NoError(t, ready.Check(context.Background()))
}

// A client CA alone is waited for; a front-proxy CA alone is not the client CA.
func TestClientCAAlone(t *testing.T) {
	client := &fakeCA{key: "client-ca-file"}
	serving, authn := delegated(t, client, nil)
	ready := ClientCA("client-ca", serving, authn, nil)
	require.Error(t, ready.Check(context.Background()))
	client.load(newCAPEM(t, "client-ca"))
	require.NoError(t, ready.Check(context.Background()))

	serving, authn = delegated(t, nil, &fakeCA{key: "requestheader-client-ca-file"})
	require.NoError(t, ClientCA("client-ca", serving, authn, nil).Check(context.Background()))
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
	ready := ClientCA("client-ca", serving, authn, nil)
	require.Error(t, ready.Check(context.Background()))
	require.Error(t, ready.Check(context.Background()))
}

// authenticationConfigMap is kube-apiserver's ConfigMap for servers that delegate
// authentication to it, with data.
func authenticationConfigMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: AuthenticationConfigMapNamespace, Name: AuthenticationConfigMapName},
		Data:       data,
	}
}

// A cluster whose kube-apiserver publishes no client CA (no client-ca-file in its ConfigMap)
// has none to wait for: the client CA would never load. One that publishes it, or whose
// ConfigMap cannot be read, is waited for; the ConfigMap is read at most once a second.
func TestClientCANotPublishedIsNotWaitedFor(t *testing.T) {
	ctx := context.Background()
	frontProxy := &fakeCA{key: "requestheader-client-ca-file"}
	frontProxy.load(newCAPEM(t, "front-proxy-ca"))

	for name, tc := range map[string]struct {
		objects []runtime.Object
		ready   bool
	}{
		"not published": {[]runtime.Object{authenticationConfigMap(map[string]string{
			"requestheader-client-ca-file": string(frontProxy.CurrentCABundleContent())})}, true},
		"published": {[]runtime.Object{authenticationConfigMap(map[string]string{
			"client-ca-file": "-----BEGIN CERTIFICATE-----"})}, false},
		"no ConfigMap yet": {nil, false},
	} {
		client := fake.NewClientset(tc.objects...)
		reads := 0
		client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
			reads++
			return false, nil, nil
		})
		serving, authn := delegated(t, &fakeCA{key: "client-ca-file"}, frontProxy)
		ready := ClientCA("client-ca", serving, authn, client)
		for _, path := range []string{"/healthz", "/livez", "/readyz"} {
			serve(ready.Gate(http.NotFoundHandler(), codecs), path)
		}
		require.Zero(t, reads, "%s: the health endpoints do not wait on kube-apiserver", name)
		err := ready.Check(ctx)
		require.Equal(t, 1, reads, name)
		if tc.ready {
			require.NoError(t, err, name)
			continue
		}
		require.ErrorContains(t, err, "the client CA is not loaded yet", name)
		require.Error(t, ready.Check(ctx), name)
		require.Equal(t, 1, reads, "%s: read again within a second", name)
	}
}

// A connection accepted before the CA was ready may have shaken hands without asking for a
// client certificate: once the CA is ready, its requests that carry none still get the 503
// that closes it, until it closes; those that carry one, and later connections, go through.
func TestGateClosesConnectionsAcceptedBeforeTheCAWasReady(t *testing.T) {
	ca := &fakeCA{key: "client-ca-file"}
	ready := &CA{CheckName: "client-ca", What: "the client CA", Provider: ca}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	listener := ready.Listen(l)
	defer listener.Close()
	accept := func() net.Conn {
		t.Helper()
		dialed, err := net.Dial("tcp", l.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { dialed.Close() })
		conn, err := listener.Accept()
		require.NoError(t, err)
		return conn
	}
	h := ready.Gate(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }), codecs)
	on := func(conn net.Conn, peer *tls.ConnectionState) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.RemoteAddr, req.TLS = conn.RemoteAddr().String(), peer
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, conn.LocalAddr()))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}

	early := accept()
	ca.load(newCAPEM(t, "client-ca"))
	require.NoError(t, ready.Check(context.Background()))
	w := on(early, &tls.ConnectionState{})
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Equal(t, "close", w.Header().Get("Connection"))
	require.Contains(t, w.Body.String(), "connect again")
	withCert := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{}}}
	require.Equal(t, http.StatusOK, on(early, withCert).Code, "a client certificate was asked for")
	require.Equal(t, http.StatusOK, on(accept(), &tls.ConnectionState{}).Code, "accepted once ready")
	require.NoError(t, early.Close())
	require.Equal(t, http.StatusOK, on(early, &tls.ConnectionState{}).Code, "forgotten once closed")

	loaded := &fakeCA{key: "client-ca-file"}
	loaded.load(newCAPEM(t, "client-ca"))
	ready = &CA{CheckName: "client-ca", What: "the client CA", Provider: loaded}
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ready.Listen(l2).Close()
	require.True(t, ready.ready.Load(), "a CA loaded before serving is in the first TLS configuration")
}
