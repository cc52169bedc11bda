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
// certificate the other signed sends none.
package authnready

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/util/cert"
)

// RetryAfterSeconds is the Retry-After of the 503 answered while the CA is not loaded: it
// loads within a second of the start.
const RetryAfterSeconds = 1

// CA is a CA a server waits for. Use it by pointer: once loaded, it stays loaded.
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

	loaded atomic.Bool
}

// ClientCA is the client CA (client-ca-file) of a server whose delegated authentication
// DelegatingAuthenticationOptions.ApplyTo set up in authn and serving: serving.ClientCA is
// the client CA, the front-proxy CA, or their union (AuthenticationInfo.ApplyClientCert),
// and only the client CA is waited for. With no client CA, nothing is.
func ClientCA(checkName string, serving *server.SecureServingInfo, authn *server.AuthenticationInfo) *CA {
	ca := &CA{CheckName: checkName, What: "the client CA", Provider: serving.ClientCA}
	if rh := authn.RequestHeaderConfig; rh != nil {
		if rh.CAContentProvider == ca.Provider {
			ca.Provider = nil
		} else {
			ca.Except = rh.CAContentProvider
		}
	}
	return ca
}

// FrontProxyCA is the front-proxy CA (requestheader-client-ca-file) of authn, which
// kube-apiserver's proxied requests are verified with; with no requestheader configuration
// (no authentication kubeconfig, --authentication-skip-lookup), nothing is waited for.
func FrontProxyCA(checkName string, authn *server.AuthenticationInfo) *CA {
	ca := &CA{CheckName: checkName, What: "the front-proxy client CA"}
	if rh := authn.RequestHeaderConfig; rh != nil {
		ca.Provider = rh.CAContentProvider
	}
	return ca
}

// Check returns nil once the CA has content, else an error that names it.
func (r *CA) Check() error {
	if r.Provider == nil || r.loaded.Load() {
		return nil
	}
	if !r.hasContent() {
		return fmt.Errorf("%s %s is not loaded yet", r.What, r.Provider.Name())
	}
	r.loaded.Store(true)
	return nil
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
	return healthz.NamedCheck(r.CheckName, func(*http.Request) error { return r.Check() })
}

// Gate answers every request but the health endpoints (/healthz, /livez, /readyz and their
// checks) with a 503 ServiceUnavailable and Retry-After while Check fails, so that clients
// retry instead of getting a 403 as system:anonymous. The 503 also closes the connection (a
// GOAWAY on HTTP/2): a client that made its TLS handshake before the CA was loaded may have
// been offered no matching CA and sent no client certificate, and must make a new
// handshake. Once the CA is loaded, requests go straight to handler.
func (r *CA) Gate(handler http.Handler, s runtime.NegotiatedSerializer) http.Handler {
	if r.Provider == nil {
		return handler
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		err := r.Check()
		if err == nil || isHealthPath(req.URL.Path) {
			handler.ServeHTTP(w, req)
			return
		}
		w.Header().Set("Connection", "close")
		responsewriters.ErrorNegotiated(serviceUnavailable(err), s, schema.GroupVersion{Version: "v1"}, w, req)
	})
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
