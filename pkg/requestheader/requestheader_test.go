package requestheader

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

const proxyName = "front-proxy-client"

// ca is a test CA that signs client certificates.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial int64

func newCA(t testing.TB, name string) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial++
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-24 * time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &ca{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// client returns a client certificate for cn signed by c, valid from notBefore to notAfter.
func (c *ca) client(t testing.TB, cn string, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return cert
}

// clock is the time the test's CA provider verifies at.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time)     { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }
func (c *clock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }

// atTime is a CA provider whose VerifyOptions verify at its clock's time (CurrentTime), for
// the Authenticator and for k8s.io/apiserver's authenticator behind it alike.
type atTime struct {
	dynamiccertificates.CAContentProvider
	clock *clock
}

func (p atTime) VerifyOptions() (x509.VerifyOptions, bool) {
	opts, ok := p.CAContentProvider.VerifyOptions()
	opts.CurrentTime = p.clock.Now()
	return opts, ok
}

// fixture is an Authenticator in front of k8s.io/apiserver's request-header authenticator
// for the same configuration: a front-proxy CA bundle in a file (reloaded by rotate), the
// allowed names in names, and a count of the chain verifications the Authenticator made.
type fixture struct {
	t        testing.TB
	file     string
	provider *dynamiccertificates.DynamicFileCAContent
	clock    *clock
	names    []string
	namesMu  sync.Mutex
	auth     *Authenticator
	upstream authenticator.Request
	verifies int
}

func newFixture(t testing.TB, bundle *ca) *fixture {
	t.Helper()
	f := &fixture{t: t, file: filepath.Join(t.TempDir(), "front-proxy-ca.crt"), names: []string{proxyName}}
	f.clock = &clock{now: time.Now()}
	require.NoError(t, os.WriteFile(f.file, bundle.pem, 0o600))
	var err error
	f.provider, err = dynamiccertificates.NewDynamicCAContentFromFile("request-header", f.file)
	require.NoError(t, err)
	config := &authenticatorfactory.RequestHeaderConfig{
		UsernameHeaders:     headerrequest.StaticStringSlice{"X-Remote-User"},
		UIDHeaders:          headerrequest.StaticStringSlice{"X-Remote-Uid"},
		GroupHeaders:        headerrequest.StaticStringSlice{"X-Remote-Group"},
		ExtraHeaderPrefixes: headerrequest.StaticStringSlice{"X-Remote-Extra-"},
		CAContentProvider:   atTime{CAContentProvider: f.provider, clock: f.clock},
		AllowedClientNames: headerrequest.StringSliceProviderFunc(func() []string {
			f.namesMu.Lock()
			defer f.namesMu.Unlock()
			return f.names
		}),
	}
	f.upstream, _, err = authenticatorfactory.DelegatingAuthenticatorConfig{RequestHeaderConfig: config}.New()
	require.NoError(t, err)
	f.auth = NewAuthenticator(config, f.upstream)
	verify := f.auth.verify
	f.auth.verify = func(leaf *x509.Certificate, opts x509.VerifyOptions) ([][]*x509.Certificate, error) {
		f.verifies++
		return verify(leaf, opts)
	}
	return f
}

// rotate replaces the front-proxy CA bundle with bundle, as a new ConfigMap or file would.
func (f *fixture) rotate(bundle *ca) {
	require.NoError(f.t, os.WriteFile(f.file, bundle.pem, 0o600))
	require.NoError(f.t, f.provider.RunOnce(context.Background()))
	require.Equal(f.t, bundle.pem, f.provider.CurrentCABundleContent())
}

func (f *fixture) allow(names ...string) {
	f.namesMu.Lock()
	defer f.namesMu.Unlock()
	f.names = names
}

// request is a request of alice proxied with the client certificates certs.
func request(certs ...*x509.Certificate) *http.Request {
	req, _ := http.NewRequest(http.MethodGet, "https://db.example.com/apis/example.com/v1/databases", nil)
	req.Header.Set("X-Remote-User", "alice")
	req.Header.Set("X-Remote-Group", "developers")
	req.Header.Set("X-Remote-Extra-Scopes", "db")
	if len(certs) > 0 {
		req.TLS = &tls.ConnectionState{PeerCertificates: certs}
	}
	return req
}

// authenticate returns the user the Authenticator gives a request with certs, after checking
// that k8s.io/apiserver's authenticator alone gives the same answer (user, or refusal).
func (f *fixture) authenticate(certs ...*x509.Certificate) (user.Info, error) {
	f.t.Helper()
	want, wantOK, wantErr := f.upstream.AuthenticateRequest(request(certs...))
	req := request(certs...)
	resp, ok, err := f.auth.AuthenticateRequest(req)
	require.Equal(f.t, wantOK, ok)
	require.Equal(f.t, wantErr != nil, err != nil, "upstream: %v, ours: %v", wantErr, err)
	if !ok {
		return nil, err
	}
	require.Equal(f.t, want.User, resp.User)
	require.Empty(f.t, req.Header.Get("X-Remote-User"), "the authentication headers are removed")
	return resp.User, nil
}

func alice() user.Info {
	return &user.DefaultInfo{Name: "alice", Groups: []string{"developers", user.AllAuthenticated},
		Extra: map[string][]string{"scopes": {"db"}}}
}

// The proxy's chain is verified once: later requests with it do not verify it again.
func TestCacheHitDoesNotVerifyAgain(t *testing.T) {
	frontProxyCA := newCA(t, "front-proxy-ca")
	f := newFixture(t, frontProxyCA)
	proxy := frontProxyCA.client(t, proxyName, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	for range 5 {
		u, err := f.authenticate(proxy)
		require.NoError(t, err)
		require.Equal(t, alice(), u)
	}
	require.Equal(t, 1, f.verifies)

	// Another certificate of the same proxy is another chain.
	renewed := frontProxyCA.client(t, proxyName, time.Now().Add(-time.Hour), time.Now().Add(2*time.Hour))
	_, err := f.authenticate(renewed)
	require.NoError(t, err)
	_, err = f.authenticate(renewed)
	require.NoError(t, err)
	require.Equal(t, 2, f.verifies)
}

// After the front-proxy CA rotates, a chain remembered for the old bundle is verified again:
// a certificate of the old CA is refused, one of the new CA accepted.
func TestCARotationRefusesOldCACert(t *testing.T) {
	oldCA, newCA := newCA(t, "front-proxy-ca"), newCA(t, "front-proxy-ca-2")
	f := newFixture(t, oldCA)
	oldProxy := oldCA.client(t, proxyName, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	newProxy := newCA.client(t, proxyName, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	_, err := f.authenticate(oldProxy)
	require.NoError(t, err)
	_, err = f.authenticate(oldProxy)
	require.NoError(t, err)
	require.Equal(t, 1, f.verifies)
	_, err = f.authenticate(newProxy)
	require.Error(t, err, "not yet trusted")

	f.rotate(newCA)
	verifies := f.verifies
	_, err = f.authenticate(oldProxy)
	require.ErrorContains(t, err, "certificate signed by unknown authority")
	require.Equal(t, verifies+1, f.verifies, "the old chain is verified again")
	_, err = f.authenticate(newProxy)
	require.NoError(t, err)

	// Back to the old bundle (the same bytes): a new load, so verified again.
	f.rotate(oldCA)
	verifies = f.verifies
	_, err = f.authenticate(oldProxy)
	require.NoError(t, err)
	require.Equal(t, verifies+1, f.verifies)
	_, err = f.authenticate(newProxy)
	require.ErrorContains(t, err, "certificate signed by unknown authority")
}

// An expired certificate is refused although its chain is remembered, and so is one not yet
// valid (a clock set back).
func TestExpiredCertRefusedEvenIfCached(t *testing.T) {
	frontProxyCA := newCA(t, "front-proxy-ca")
	f := newFixture(t, frontProxyCA)
	start := f.clock.Now()
	proxy := frontProxyCA.client(t, proxyName, start.Add(-time.Minute), start.Add(time.Hour))
	_, err := f.authenticate(proxy)
	require.NoError(t, err)
	require.Equal(t, 1, f.verifies)

	f.clock.Set(proxy.NotAfter)
	_, err = f.authenticate(proxy)
	require.NoError(t, err, "valid up to NotAfter included")
	require.Equal(t, 1, f.verifies)

	f.clock.Add(time.Second)
	_, err = f.authenticate(proxy)
	require.ErrorContains(t, err, "certificate has expired or is not yet valid")
	require.Equal(t, 2, f.verifies)

	f.clock.Set(start)
	_, err = f.authenticate(proxy)
	require.NoError(t, err)
	f.clock.Set(proxy.NotBefore.Add(-time.Second))
	_, err = f.authenticate(proxy)
	require.ErrorContains(t, err, "certificate has expired or is not yet valid")
}

// The CA's own expiry counts as the chain's: once the CA expires, the proxy's certificate
// that outlives it is refused.
func TestExpiredCARefusedEvenIfCached(t *testing.T) {
	frontProxyCA := newCA(t, "front-proxy-ca")
	f := newFixture(t, frontProxyCA)
	proxy := frontProxyCA.client(t, proxyName, time.Now().Add(-time.Hour), frontProxyCA.cert.NotAfter.Add(time.Hour))
	_, err := f.authenticate(proxy)
	require.NoError(t, err)
	f.clock.Set(frontProxyCA.cert.NotAfter.Add(time.Minute))
	_, err = f.authenticate(proxy)
	require.ErrorContains(t, err, "certificate has expired or is not yet valid")
}

// A certificate of the front-proxy CA whose common name is not allowed is refused, and a
// remembered chain is refused once its name is no longer allowed.
func TestWrongNameRefused(t *testing.T) {
	frontProxyCA := newCA(t, "front-proxy-ca")
	f := newFixture(t, frontProxyCA)
	proxy := frontProxyCA.client(t, proxyName, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	other := frontProxyCA.client(t, "someone-else", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))

	_, err := f.authenticate(other)
	require.ErrorContains(t, err, "x509: subject with cn=someone-else is not in the allowed list")
	_, err = f.authenticate(proxy)
	require.NoError(t, err)

	f.allow("another-proxy")
	verifies := f.verifies
	_, err = f.authenticate(proxy)
	require.ErrorContains(t, err, "x509: subject with cn=front-proxy-client is not in the allowed list")
	require.Equal(t, verifies, f.verifies, "the chain is remembered, the name is not")

	f.allow() // none given: any name
	_, err = f.authenticate(other)
	require.NoError(t, err)
}

// Requests the request-header authenticator does not authenticate get the delegate's answer:
// no client certificate, a certificate of another CA, no user header.
func TestOtherRequestsGoToDelegate(t *testing.T) {
	frontProxyCA, clientCA := newCA(t, "front-proxy-ca"), newCA(t, "client-ca")
	f := newFixture(t, frontProxyCA)
	u, err := f.authenticate()
	require.NoError(t, err)
	require.Nil(t, u)
	_, err = f.authenticate(clientCA.client(t, proxyName, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)))
	require.ErrorContains(t, err, "certificate signed by unknown authority")

	proxy := frontProxyCA.client(t, proxyName, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	calls := 0
	f.auth.delegate = authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
		calls++
		return f.upstream.AuthenticateRequest(req)
	})
	req := request(proxy)
	req.Header.Del("X-Remote-User")
	_, ok, err := f.auth.AuthenticateRequest(req)
	require.False(t, ok)
	require.NoError(t, err, "no user: no opinion, as upstream")
	require.Equal(t, 1, calls)
	_, err = f.authenticate(proxy)
	require.NoError(t, err)
	require.Equal(t, 1, calls, "a front-proxy request is not delegated")
}

// The intermediates the proxy sends are part of its chain: a chain through an intermediate
// CA verifies and is remembered, and the leaf alone, without its intermediate, is refused.
func TestIntermediates(t *testing.T) {
	root := newCA(t, "front-proxy-root")
	f := newFixture(t, root)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "front-proxy-intermediate"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, root.cert, &key.PublicKey, root.key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	intermediate := &ca{cert: cert, key: key}
	proxy := intermediate.client(t, proxyName, time.Now().Add(-time.Hour), time.Now().Add(3*time.Hour))

	_, err = f.authenticate(proxy, intermediate.cert)
	require.NoError(t, err)
	_, err = f.authenticate(proxy, intermediate.cert)
	require.NoError(t, err)
	require.Equal(t, 1, f.verifies)
	_, err = f.authenticate(proxy)
	require.ErrorContains(t, err, "certificate signed by unknown authority")

	// The intermediate expires first (an hour), so the chain does.
	f.clock.Add(2 * time.Hour)
	_, err = f.authenticate(proxy, intermediate.cert)
	require.ErrorContains(t, err, "certificate has expired or is not yet valid")
}

// A provider that makes a new pool on every call (dynamiccertificates' union of providers)
// never matches a remembered chain: every request is verified, and still authenticated.
func TestNewPoolPerCallVerifiesEveryRequest(t *testing.T) {
	frontProxyCA := newCA(t, "front-proxy-ca")
	static, err := dynamiccertificates.NewStaticCAContent("front-proxy", frontProxyCA.pem)
	require.NoError(t, err)
	config := &authenticatorfactory.RequestHeaderConfig{
		UsernameHeaders:     headerrequest.StaticStringSlice{"X-Remote-User"},
		UIDHeaders:          headerrequest.StaticStringSlice{},
		GroupHeaders:        headerrequest.StaticStringSlice{"X-Remote-Group"},
		ExtraHeaderPrefixes: headerrequest.StaticStringSlice{"X-Remote-Extra-"},
		CAContentProvider:   dynamiccertificates.NewUnionCAContentProvider(static),
		AllowedClientNames:  headerrequest.StaticStringSlice{proxyName},
	}
	upstream, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{RequestHeaderConfig: config}.New()
	require.NoError(t, err)
	a := NewAuthenticator(config, upstream)
	verifies := 0
	a.verify = func(leaf *x509.Certificate, opts x509.VerifyOptions) ([][]*x509.Certificate, error) {
		verifies++
		return leaf.Verify(opts)
	}
	proxy := frontProxyCA.client(t, proxyName, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	for range 3 {
		resp, ok, err := a.AuthenticateRequest(request(proxy))
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "alice", resp.User.GetName())
	}
	require.Equal(t, 3, verifies)
}

// The cache is bounded: past CacheSize chains, the least recently used is verified again.
func TestCacheIsBounded(t *testing.T) {
	frontProxyCA := newCA(t, "front-proxy-ca")
	f := newFixture(t, frontProxyCA)
	first := frontProxyCA.client(t, proxyName, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	_, err := f.authenticate(first)
	require.NoError(t, err)
	for range CacheSize {
		_, err := f.authenticate(frontProxyCA.client(t, proxyName, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)))
		require.NoError(t, err)
	}
	require.Len(t, f.auth.verified.Keys(), CacheSize)
	verifies := f.verifies
	_, err = f.authenticate(first)
	require.NoError(t, err)
	require.Equal(t, verifies+1, f.verifies, "evicted, verified again")
}

// A chain that did not verify is not verified again (for RefusedTTL): its requests get the
// delegate's answer, which stays right when the chain becomes valid meanwhile.
func TestRefusedChainIsLeftToDelegate(t *testing.T) {
	frontProxyCA, clientCA := newCA(t, "front-proxy-ca"), newCA(t, "client-ca")
	f := newFixture(t, frontProxyCA)
	admin := clientCA.client(t, "admin", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	for range 3 {
		_, err := f.authenticate(admin)
		require.ErrorContains(t, err, "certificate signed by unknown authority")
	}
	require.Equal(t, 1, f.verifies)

	start := f.clock.Now()
	early := frontProxyCA.client(t, proxyName, start.Add(time.Minute), start.Add(time.Hour))
	_, err := f.authenticate(early)
	require.ErrorContains(t, err, "certificate has expired or is not yet valid")
	f.clock.Set(start.Add(2 * time.Minute))
	u, err := f.authenticate(early)
	require.NoError(t, err, "accepted by the delegate")
	require.Equal(t, alice(), u)
	require.Equal(t, 2, f.verifies)
}

// The cost of authenticating one proxied request: k8s.io/apiserver's request-header
// authenticator alone, and the Authenticator in front of it with the chain remembered.
func BenchmarkAuthenticateRequest(b *testing.B) {
	frontProxyCA := newCA(b, "front-proxy-ca")
	f := newFixture(b, frontProxyCA)
	proxy := frontProxyCA.client(b, proxyName, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	for _, bc := range []struct {
		name string
		auth authenticator.Request
	}{{"upstream", f.upstream}, {"cached", f.auth}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, ok, err := bc.auth.AuthenticateRequest(request(proxy)); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
