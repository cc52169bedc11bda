// Package authnready holds a server's requests back until the CA its delegated
// authentication verifies client certificates with is loaded. k8s.io/apiserver
// loads a CA it reads from the ConfigMap kube-system/extension-apiserver-authentication
// (the front-proxy CA, requestheader-client-ca-file, and the client CA, client-ca-file)
// only once the server serves; until then a client certificate authenticates as
// system:anonymous, which authorization refuses with a 403 that clients do not retry.
package authnready

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

// RetryAfterSeconds is the Retry-After of the 503 answered while the CA is not loaded: it
// loads within a second of the start.
const RetryAfterSeconds = 1

// CA is a CA a server waits for.
type CA struct {
	// CheckName names the /readyz check (/readyz/<CheckName>) that fails until it is loaded.
	CheckName string
	// What names it in messages ("the front-proxy client CA").
	What string
	// Provider is the CA; nil when the server trusts no such CA: then it is always ready.
	Provider dynamiccertificates.CAContentProvider
}

// Check returns nil once the CA has content, else an error that names it.
func (r CA) Check() error {
	if r.Provider == nil || len(r.Provider.CurrentCABundleContent()) > 0 {
		return nil
	}
	return fmt.Errorf("%s %s is not loaded yet", r.What, r.Provider.Name())
}

// HealthCheck is the /readyz check CheckName.
func (r CA) HealthCheck() healthz.HealthChecker {
	return healthz.NamedCheck(r.CheckName, func(*http.Request) error { return r.Check() })
}

// Gate answers every request but the health endpoints (/healthz, /livez, /readyz and their
// checks) with a 503 ServiceUnavailable and Retry-After while Check fails, so that clients
// retry instead of getting a 403 as system:anonymous. The 503 also closes the connection (a
// GOAWAY on HTTP/2): a client that made its TLS handshake before the CA was loaded may have
// been offered no matching CA and sent no client certificate, and must make a new
// handshake. Once the CA is loaded, requests go straight to handler.
func (r CA) Gate(handler http.Handler, s runtime.NegotiatedSerializer) http.Handler {
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
