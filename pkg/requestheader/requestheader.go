// Package requestheader authenticates the requests a front proxy sends on behalf of its users
// (kube-apiserver's kube-aggregator, with its --proxy-client-cert-file), as k8s.io/apiserver's
// request-header authenticator does, but verifies the proxy's client certificate chain once
// per chain and front-proxy CA bundle rather than on every request.
//
// k8s.io/apiserver (x509request.Verifier, built by headerrequest.NewDynamicVerifyOptionsSecure)
// runs the full x509 chain verification, signature checks included, on every request. A front
// proxy holds a few connections and sends many requests on each, always with the same chain,
// so the verification of one chain against one CA bundle is remembered. What a request is
// still checked against, every time, is what can change under a remembered result:
//
//   - the CA bundle: a result counts only for the bundle it was verified against (the Roots
//     pool of the provider's VerifyOptions, a new pool for each bundle the provider loads);
//     after a rotation every chain is verified again;
//   - time: every certificate of the verified chain must be valid (NotBefore to NotAfter) at
//     the request's time, else the chain is verified again and, expired, refused;
//   - the allowed names (requestheader-allowed-names), read for each request.
package requestheader

import (
	"crypto/x509"
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
)

// CacheSize bounds the chains remembered as verified, and separately those remembered as
// refused, least recently used first out. Each front proxy presents one chain (two while its
// certificate is renewed), so a handful are in use at any time.
const CacheSize = 128

// RefusedTTL is how long a chain that did not verify against the front-proxy CA is not
// verified again: its requests go straight to the delegate, whose own request-header
// authenticator verifies it (and refuses it, or accepts it if it has become valid since), and
// whose client-certificate authenticator then tries it against the client CA, as for a client
// calling the server directly. Skipping the verification never accepts a request, so an entry
// that is out of date only costs the delegate's verification until it expires.
const RefusedTTL = time.Minute

// Authenticator authenticates a request whose client certificate chain verifies against the
// front-proxy CA, and whose leaf's common name is allowed, by the user named in its request
// headers (with the group system:authenticated), as the request-header authenticator of
// k8s.io/apiserver would. Every other request, and one whose headers name no user, is left to
// Delegate, the server's whole authenticator, with the request-header authenticator first: its
// answer is then the answer, so this one only skips the verification of a chain known good.
type Authenticator struct {
	verifyOptions x509request.VerifyOptionFunc
	allowedNames  headerrequest.StringSliceProvider
	headers       authenticator.Request
	delegate      authenticator.Request
	verified      *cache.LRUExpireCache
	refused       *cache.LRUExpireCache
	verify        func(leaf *x509.Certificate, opts x509.VerifyOptions) ([][]*x509.Certificate, error)
}

// NewAuthenticator returns an Authenticator for the request-header configuration config (its
// CA provider, allowed names and headers, all read for each request, so they may change) in
// front of delegate, the authenticator k8s.io/apiserver built from the same configuration.
func NewAuthenticator(config *authenticatorfactory.RequestHeaderConfig, delegate authenticator.Request) *Authenticator {
	return &Authenticator{
		verifyOptions: config.CAContentProvider.VerifyOptions,
		allowedNames:  config.AllowedClientNames,
		headers: group.NewAuthenticatedGroupAdder(headerrequest.NewDynamic(
			config.UsernameHeaders, config.UIDHeaders, config.GroupHeaders, config.ExtraHeaderPrefixes)),
		delegate: delegate,
		verified: cache.NewLRUExpireCache(CacheSize),
		refused:  cache.NewLRUExpireCache(CacheSize),
		verify:   (*x509.Certificate).Verify,
	}
}

// AuthenticateRequest implements authenticator.Request.
func (a *Authenticator) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if a.fromFrontProxy(req) {
		if resp, ok, err := a.headers.AuthenticateRequest(req); ok && err == nil {
			return resp, true, nil
		}
	}
	return a.delegate.AuthenticateRequest(req)
}

// fromFrontProxy reports whether req's client certificate chain verifies against the
// front-proxy CA bundle at the request's time and its leaf's common name is allowed (any,
// when no names are given), the two conditions of x509request.Verifier.
func (a *Authenticator) fromFrontProxy(req *http.Request) bool {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return false
	}
	opts, ok := a.verifyOptions()
	if !ok {
		return false
	}
	certs := req.TLS.PeerCertificates
	return a.chainVerifies(opts, certs) && a.nameAllowed(certs[0].Subject.CommonName)
}

// chainKey names a chain verified against a CA bundle: the DER of every certificate the
// client sent, leaf first (DER is self-delimiting, so the concatenation is unambiguous), and
// the pools of the options it was verified with. The provider's VerifyOptions hold one
// Roots pool per CA bundle it loaded, so a key holds the pool of an old bundle (and keeps it
// from being collected while the entry lives) and never matches once the bundle changed.
type chainKey struct {
	roots, intermediates *x509.CertPool
	chain                string
}

// validity is when a verified chain is valid: the latest NotBefore and the earliest NotAfter
// of its certificates, both inclusive (crypto/x509's rule).
type validity struct {
	notBefore, notAfter time.Time
}

func (v validity) contains(t time.Time) bool {
	return !t.Before(v.notBefore) && !t.After(v.notAfter)
}

// chainVerifies reports whether the chain certs (leaf first, then the intermediates the client
// sent) verifies with opts: true from a remembered verification with the same options when
// the request's time is inside the chain's validity, false for a chain remembered as refused
// (RefusedTTL), else by verifying it (and remembering a chain that verifies until its
// NotAfter, one that does not for RefusedTTL). Like x509request.Verifier, the client's certificates
// after the leaf are the intermediates when opts has none, and the time is opts.CurrentTime,
// or now when that is zero.
func (a *Authenticator) chainVerifies(opts x509.VerifyOptions, certs []*x509.Certificate) bool {
	now := opts.CurrentTime
	if now.IsZero() {
		now = time.Now()
	}
	key := chainKey{roots: opts.Roots, intermediates: opts.Intermediates, chain: chainDER(certs)}
	if v, ok := a.verified.Get(key); ok && v.(validity).contains(now) {
		return true
	}
	if _, ok := a.refused.Get(key); ok {
		return false
	}

	if opts.Intermediates == nil && len(certs) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range certs[1:] {
			opts.Intermediates.AddCert(c)
		}
	}
	opts.CurrentTime = now
	chains, err := a.verify(certs[0], opts)
	if err != nil || len(chains) == 0 {
		a.refused.Add(key, struct{}{}, RefusedTTL)
		return false
	}
	v := longestValidity(chains)
	if ttl := v.notAfter.Sub(now); ttl > 0 {
		a.verified.Add(key, v, ttl)
	}
	return true
}

// longestValidity is the validity of the verified chain that stays valid longest. Every chain
// Verify returns is valid at the time it verified at; another chain valid later is found by
// verifying again once this one has expired.
func longestValidity(chains [][]*x509.Certificate) validity {
	var best validity
	for i, chain := range chains {
		v := validity{notBefore: chain[0].NotBefore, notAfter: chain[0].NotAfter}
		for _, c := range chain[1:] {
			if c.NotBefore.After(v.notBefore) {
				v.notBefore = c.NotBefore
			}
			if c.NotAfter.Before(v.notAfter) {
				v.notAfter = c.NotAfter
			}
		}
		if i == 0 || v.notAfter.After(best.notAfter) {
			best = v
		}
	}
	return best
}

// chainDER is the DER of certs, concatenated.
func chainDER(certs []*x509.Certificate) string {
	n := 0
	for _, c := range certs {
		n += len(c.Raw)
	}
	var b strings.Builder
	b.Grow(n)
	for _, c := range certs {
		b.Write(c.Raw)
	}
	return b.String()
}

// nameAllowed reports whether a verified leaf's common name cn may authenticate users: any,
// when no names are allowed explicitly (requestheader-allowed-names empty).
func (a *Authenticator) nameAllowed(cn string) bool {
	names := a.allowedNames.Value()
	return len(names) == 0 || slices.Contains(names, cn)
}
