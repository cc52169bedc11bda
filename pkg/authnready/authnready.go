// Package authnready holds a server's requests back until the CA its delegated
// authentication verifies client certificates with is loaded. k8s.io/apiserver
// loads a CA it reads from the ConfigMap kube-system/extension-apiserver-authentication
// (the front-proxy CA, requestheader-client-ca-file, and the client CA, client-ca-file)
// only once the server serves; until then a client certificate authenticates as
// system:anonymous, which authorization refuses with a 403 that clients do not retry.
//
// The client CA and the front-proxy CA load on their own (each has its own informer), and
// the server's TLS configuration offers their union (AuthenticationInfo.ApplyClientCert): a
// handshake made while only one is loaded offers only that one, and a client whose
// certificate the other signed sends none. The TLS configuration itself is rebuilt from
// the loaded content a moment later, by a worker of its own; and a client keeps the
// connection it shook hands on. So a CA is ready once it is loaded and a handshake asks for
// it, and a connection accepted before then that sent no certificate is closed.
package authnready

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/cert"
)

// RetryAfterSeconds is the Retry-After of the 503 answered while the CA is not loaded: it
// loads within a second of the start.
const RetryAfterSeconds = 1

// CA is a CA a server waits for. Use it by pointer: once ready, it stays ready.
type CA struct {
	// CheckName names the /readyz check (/readyz/<CheckName>) that fails until it is loaded.
	CheckName string
	// What names it in messages ("the front-proxy client CA").
	What string
	// Provider is the CA; nil when the server trusts no such CA: then it is always ready.
	Provider dynamiccertificates.CAContentProvider
	// Except, when set, is a part of Provider that loads on its own and is not waited for:
	// Provider is then a union whose bundle holds the certificates of each part loaded so
	// far, and the CA is loaded once the bundle holds more certificates than Except's.
	Except dynamiccertificates.CAContentProvider
	// Published, when set, tells whether the CA is published where the delegated
	// authentication reads it (PublishedIn); it is asked, at most once a second, while the
	// CA is not loaded. A CA that is not published never loads, and is not waited for.
	Published func(context.Context) (bool, error)
	// Addr, when set, is the server's listener: the CA is ready only once a TLS handshake
	// with it asks for a client certificate from every CA of Provider's bundle (offered).
	Addr net.Addr

	ready atomic.Bool
	// early holds the connections Listen accepted before the CA was ready (connKey), until
	// they close.
	early sync.Map
	// checking is held while Check asks Published or shakes hands with Addr, one caller at a
	// time; asked is when Published was last asked.
	checking sync.Mutex
	asked    time.Time
}

// ClientCA is the client CA (client-ca-file) of a server whose delegated authentication
// DelegatingAuthenticationOptions.ApplyTo set up in authn and serving: serving.ClientCA is
// the client CA, the front-proxy CA, or their union (AuthenticationInfo.ApplyClientCert),
// and only the client CA is waited for. With no client CA, nothing is. With client (nil for
// none), a cluster whose kube-apiserver publishes no client CA is not waited for either
// (PublishedIn).
func ClientCA(checkName string, serving *server.SecureServingInfo, authn *server.AuthenticationInfo, client kubernetes.Interface) *CA {
	ca := &CA{CheckName: checkName, What: "the client CA", Provider: serving.ClientCA, Addr: listenerAddr(serving)}
	if rh := authn.RequestHeaderConfig; rh != nil {
		if rh.CAContentProvider == ca.Provider {
			ca.Provider = nil
		} else {
			ca.Except = rh.CAContentProvider
		}
	}
	if client != nil {
		ca.Published = PublishedIn(client, "client-ca-file")
	}
	return ca
}

// The ConfigMap kube-apiserver publishes its client CA and front-proxy settings in, for the
// servers that delegate authentication to it.
const (
	AuthenticationConfigMapNamespace = metav1.NamespaceSystem
	AuthenticationConfigMapName      = "extension-apiserver-authentication"
)

// PublishedIn is a CA.Published that reads the ConfigMap
// kube-system/extension-apiserver-authentication with client and tells whether it has key
// (client-ca-file, requestheader-client-ca-file): kube-apiserver writes each only when it
// has that CA. It returns the error of the read (NotFound before kube-apiserver has
// published the ConfigMap, Forbidden without the role extension-apiserver-authentication-reader).
func PublishedIn(client kubernetes.Interface, key string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		cm, err := client.CoreV1().ConfigMaps(AuthenticationConfigMapNamespace).Get(ctx, AuthenticationConfigMapName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return cm.Data[key] != "", nil
	}
}

// FrontProxyCA is the front-proxy CA (requestheader-client-ca-file) of authn, which
// kube-apiserver's proxied requests are verified with, served on serving; with no
// requestheader configuration (no authentication kubeconfig, --authentication-skip-lookup),
// nothing is waited for.
func FrontProxyCA(checkName string, serving *server.SecureServingInfo, authn *server.AuthenticationInfo) *CA {
	ca := &CA{CheckName: checkName, What: "the front-proxy client CA", Addr: listenerAddr(serving)}
	if rh := authn.RequestHeaderConfig; rh != nil {
		ca.Provider = rh.CAContentProvider
	}
	return ca
}

// listenerAddr is the address serving listens on, nil when it has no listener.
func listenerAddr(serving *server.SecureServingInfo) net.Addr {
	if serving == nil || serving.Listener == nil {
		return nil
	}
	return serving.Listener.Addr()
}

// Check returns nil once the CA is ready: loaded (hasContent) or not published, and asked
// for by a handshake with Addr (offered); or not trusted at all. Else it returns an error
// that names the CA. Only one caller at a time asks Published or shakes hands; the others
// get an error meanwhile.
func (r *CA) Check(ctx context.Context) error {
	if r.Provider == nil || r.ready.Load() {
		return nil
	}
	if !r.checking.TryLock() {
		return fmt.Errorf("%s is being checked", r.What)
	}
	defer r.checking.Unlock()
	if !r.hasContent() && !r.unpublished(ctx) {
		if r.Except != nil {
			return fmt.Errorf("%s is not loaded yet", r.What)
		}
		return fmt.Errorf("%s %s is not loaded yet", r.What, r.Provider.Name())
	}
	if r.Addr != nil && !offered(ctx, r.Addr, r.Provider.CurrentCABundleContent()) {
		return fmt.Errorf("%s is loaded, but the TLS configuration does not ask for it yet", r.What)
	}
	r.ready.Store(true)
	return nil
}

// askTimeout bounds a Published call and a handshake of offered.
const askTimeout = time.Second

// offered reports whether a TLS handshake with the server at addr (an unspecified address is
// dialled on loopback) now asks for a client certificate from every CA in bundle (true for
// an empty bundle; false when the handshake fails). The
// server's TLS configuration is rebuilt from the CA's content by a worker of its own
// (dynamiccertificates.DynamicServingCertificateController) a moment after the content
// loads, and a client that shakes hands before then sends no certificate, and keeps the
// connection.
func offered(ctx context.Context, addr net.Addr, bundle []byte) bool {
	if len(bytes.TrimSpace(bundle)) == 0 {
		return true
	}
	cas, err := cert.ParseCertsPEM(bundle)
	if err != nil {
		return false
	}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	hosts := []string{host}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		// 0.0.0.0 is reported as [::] by a dual-stack socket, on hosts without ::1 too.
		hosts = []string{"127.0.0.1", "::1"}
	}
	for _, host := range hosts {
		if asks, ok := asksFor(ctx, net.JoinHostPort(host, port)); ok {
			return containsAll(asks, cas)
		}
	}
	return false
}

// containsAll reports whether subjects holds the subject of every certificate in cas.
func containsAll(subjects [][]byte, cas []*x509.Certificate) bool {
	for _, ca := range cas {
		if !slices.ContainsFunc(subjects, func(subject []byte) bool { return bytes.Equal(subject, ca.RawSubject) }) {
			return false
		}
	}
	return true
}

// asksFor shakes hands with the server at hostPort, for at most askTimeout, and returns the
// subjects of the CAs its CertificateRequest names; ok is false when the handshake fails.
func asksFor(ctx context.Context, hostPort string) (subjects [][]byte, ok bool) {
	var asked [][]byte
	dialer := &tls.Dialer{Config: &tls.Config{
		// The handshake only reads which CAs the server asks for, and sends no certificate:
		// whom it talks to does not matter.
		InsecureSkipVerify: true,
		MinVersion:         tls.VersionTLS12,
		GetClientCertificate: func(req *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			asked = req.AcceptableCAs
			return &tls.Certificate{}, nil
		},
	}}
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	conn, err := dialer.DialContext(ctx, "tcp", hostPort)
	if err != nil {
		return nil, false
	}
	_ = conn.Close()
	return asked, true
}

// unpublished reports whether Published says the CA is not published. It asks at most once
// a second, for at most askTimeout; r.checking is held.
func (r *CA) unpublished(ctx context.Context) bool {
	if r.Published == nil || time.Since(r.asked) < time.Second {
		return false
	}
	r.asked = time.Now()
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	published, err := r.Published(ctx)
	return err == nil && !published
}

// hasContent reports whether Provider's bundle holds a certificate, beyond Except's when
// Except is set. Except is read before and after Provider; if it changed in between (a
// rotation), the count cannot be trusted and the answer is false: the next check decides.
func (r *CA) hasContent() bool {
	if r.Except == nil {
		return certificates(r.Provider.CurrentCABundleContent()) > 0
	}
	except := r.Except.CurrentCABundleContent()
	have := certificates(r.Provider.CurrentCABundleContent())
	if !bytes.Equal(except, r.Except.CurrentCABundleContent()) {
		return false
	}
	return have > certificates(except)
}

// certificates is the number of certificates in a PEM bundle: 0 for an empty one.
func certificates(bundle []byte) int {
	certs, err := cert.ParseCertsPEM(bundle)
	if err != nil {
		return 0
	}
	return len(certs)
}

// HealthCheck is the /readyz check CheckName.
func (r *CA) HealthCheck() healthz.HealthChecker {
	return healthz.NamedCheck(r.CheckName, func(req *http.Request) error { return r.Check(req.Context()) })
}

// Gate answers every request but the health endpoints (/healthz, /livez, /readyz and their
// checks, which go straight to handler) with a 503 ServiceUnavailable and Retry-After while
// Check fails, so that clients retry instead of getting a 403 as system:anonymous. The 503
// also closes the connection (a GOAWAY on HTTP/2): a client that made its TLS handshake
// before the CA was ready may have been asked for no matching CA and sent no client
// certificate, and must make a new handshake. Once the CA is ready, requests go straight to
// handler, but for those that carry no client certificate on a connection Listen accepted
// before then, which get the same 503.
//
// A client that resumes a TLS session made before then (one with a session cache, such as
// curl or a browser; client-go keeps none) is not asked for a certificate again: under
// RequestClientCert, crypto/tls resumes a session made without one. It authenticates as
// system:anonymous until it makes a full handshake.
func (r *CA) Gate(handler http.Handler, s runtime.NegotiatedSerializer) http.Handler {
	if r.Provider == nil {
		return handler
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if isHealthPath(req.URL.Path) {
			handler.ServeHTTP(w, req)
			return
		}
		err := r.Check(req.Context())
		if err == nil && r.shookHandsEarly(req) {
			err = fmt.Errorf("the connection was made before %s was ready: connect again", r.What)
		}
		if err == nil {
			handler.ServeHTTP(w, req)
			return
		}
		w.Header().Set("Connection", "close")
		responsewriters.ErrorNegotiated(serviceUnavailable(err), s, schema.GroupVersion{Version: "v1"}, w, req)
	})
}

// shookHandsEarly reports whether req came on a connection Listen accepted before the CA was
// ready and sent no client certificate: its handshake may not have asked for one.
func (r *CA) shookHandsEarly(req *http.Request) bool {
	if req.TLS != nil && len(req.TLS.PeerCertificates) > 0 {
		return false
	}
	local, _ := req.Context().Value(http.LocalAddrContextKey).(net.Addr)
	_, early := r.early.Load(connKey(local, req.RemoteAddr))
	return early
}

// connKey names a connection by its two ends: "local remote".
func connKey(local net.Addr, remote string) string {
	if local == nil {
		return remote
	}
	return local.String() + " " + remote
}

// Listen returns l for the server to serve on, so that Gate knows the connections accepted
// before the CA was ready. A CA loaded when Listen is called is ready at once: serving
// builds its first TLS configuration from the CA's content before it accepts a connection
// (SecureServingInfo.Serve).
func (r *CA) Listen(l net.Listener) net.Listener {
	if r.Provider == nil {
		return l
	}
	if r.hasContent() {
		r.ready.Store(true)
	}
	return &listener{Listener: l, ca: r}
}

// listener remembers in ca.early the connections it accepts while ca is not ready.
type listener struct {
	net.Listener
	ca *CA
}

func (l *listener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil || l.ca.ready.Load() {
		return conn, err
	}
	key := connKey(conn.LocalAddr(), conn.RemoteAddr().String())
	l.ca.early.Store(key, struct{}{})
	return &earlyConn{Conn: conn, forget: func() { l.ca.early.Delete(key) }}, nil
}

// earlyConn is a connection accepted before the CA was ready; closing it forgets it.
type earlyConn struct {
	net.Conn
	closing sync.Once
	forget  func()
}

func (c *earlyConn) Close() error {
	c.closing.Do(c.forget)
	return c.Conn.Close()
}

// serviceUnavailable is a 503 ServiceUnavailable with Retry-After RetryAfterSeconds whose
// message says what is not ready.
func serviceUnavailable(err error) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusServiceUnavailable,
		Reason:  metav1.StatusReasonServiceUnavailable,
		Message: fmt.Sprintf("the server cannot authenticate requests yet: %v", err),
		Details: &metav1.StatusDetails{RetryAfterSeconds: RetryAfterSeconds},
	}}
}

// isHealthPath reports whether path is /healthz, /livez or /readyz, or one of their
// individual checks (/readyz/etcd).
func isHealthPath(path string) bool {
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
