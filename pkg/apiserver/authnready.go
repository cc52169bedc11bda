package apiserver

import (
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
)

// RequestHeaderCACheckName is the /readyz check (/readyz/requestheader-client-ca)
// that fails until the front-proxy CA is loaded.
const RequestHeaderCACheckName = "requestheader-client-ca"

// authenticationRetryAfterSeconds is the Retry-After of the 503 answered while
// the front-proxy CA is not loaded: it loads within a second of the start.
const authenticationRetryAfterSeconds = 1

// requestHeaderCAReady says whether the CA that verifies the front proxy's
// client certificate (kube-apiserver's --requestheader-client-ca-file, read
// from the ConfigMap kube-system/extension-apiserver-authentication unless
// --requestheader-client-ca-file is given) has content. k8s.io/apiserver
// starts loading that ConfigMap when the server starts serving, and until it
// is loaded every request kube-apiserver proxies authenticates as
// system:anonymous, which authorization refuses with a 403 that clients do not
// retry.
type requestHeaderCAReady struct {
	// ca is nil when the server trusts no front proxy (no requestheader
	// configuration): then it is always ready.
	ca dynamiccertificates.CAContentProvider
}

// check returns nil once the CA has content, else an error that names it.
func (r requestHeaderCAReady) check() error {
	if r.ca == nil || len(r.ca.CurrentCABundleContent()) > 0 {
		return nil
	}
	return fmt.Errorf("the front-proxy client CA %s is not loaded yet", r.ca.Name())
}

// healthCheck is the /readyz check RequestHeaderCACheckName.
func (r requestHeaderCAReady) healthCheck() healthz.HealthChecker {
	return healthz.NamedCheck(RequestHeaderCACheckName, func(*http.Request) error { return r.check() })
}

// withRequestHeaderCAReady answers every request but the health endpoints
// (/healthz, /livez, /readyz and their checks) with a 503 ServiceUnavailable
// and Retry-After while ready.check fails, so that clients retry instead of
// getting a 403 as system:anonymous. The 503 also closes the connection (a GOAWAY
// on HTTP/2): a client that made its TLS handshake before the CA was loaded may
// have been offered no matching CA and sent no client certificate, and must
// make a new handshake. Once the CA is loaded, requests go straight to handler.
func withRequestHeaderCAReady(handler http.Handler, ready requestHeaderCAReady, s runtime.NegotiatedSerializer) http.Handler {
	if ready.ca == nil {
		return handler
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		err := ready.check()
		if err == nil || isHealthPath(req.URL.Path) {
			handler.ServeHTTP(w, req)
			return
		}
		w.Header().Set("Connection", "close")
		responsewriters.ErrorNegotiated(serviceUnavailable(err), s, schema.GroupVersion{Version: "v1"}, w, req)
	})
}

// serviceUnavailable is a 503 ServiceUnavailable with Retry-After
// authenticationRetryAfterSeconds whose message says what is not ready.
func serviceUnavailable(err error) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusServiceUnavailable,
		Reason:  metav1.StatusReasonServiceUnavailable,
		Message: fmt.Sprintf("the server cannot authenticate requests yet: %v", err),
		Details: &metav1.StatusDetails{RetryAfterSeconds: authenticationRetryAfterSeconds},
	}}
}

// isHealthPath reports whether path is /healthz, /livez or /readyz, or one of
// their individual checks (/readyz/etcd).
func isHealthPath(path string) bool {
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
