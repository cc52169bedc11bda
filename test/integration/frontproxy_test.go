package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"example.com/database-apiserver/test/integration/framework"
)

// testCA signs client certificates in tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// clientCert returns a client certificate and its key for cn, in PEM.
func (c *testCA) clientCert(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// A server that trusts a front-proxy CA (--requestheader-client-ca-file) authenticates the
// users a proxy names in its headers, on every request of a connection, while the proxy's
// certificate is of that CA and its name allowed; once the CA file is replaced, the same
// proxy's certificate is refused on the connection it already holds, and a proxy with a
// certificate of the new CA is accepted.
func TestFrontProxyAuthenticationFollowsCARotation(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "front-proxy-ca.crt")
	oldCA, newCA := newTestCA(t, "front-proxy-ca"), newTestCA(t, "front-proxy-ca-2")
	require.NoError(t, os.WriteFile(caFile, oldCA.pem, 0o600))
	s, err := framework.Start(
		"--authentication-skip-lookup",
		"--requestheader-client-ca-file="+caFile,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
	)
	require.NoError(t, err)
	t.Cleanup(s.Stop)

	// proxy is a client of s with a client certificate of ca for cn, sending the headers of
	// a front proxy for alice in group (system:masters is authorized by the server without
	// kube-apiserver, any other group is not), over one connection kept for its requests.
	proxy := func(ca *testCA, cn, group string) *http.Client {
		config := rest.CopyConfig(s.ClientConfig)
		config.BearerToken = ""
		config.CertData, config.KeyData = ca.clientCert(t, cn)
		config.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
				req = req.Clone(req.Context())
				req.Header.Set("X-Remote-User", "alice")
				req.Header.Set("X-Remote-Group", group)
				req.Header.Set("X-Remote-Extra-Scopes", "db")
				return rt.RoundTrip(req)
			})
		}
		client, err := rest.HTTPClientFor(config)
		require.NoError(t, err)
		return client
	}
	// get is the status s answers a GET of databases from client with.
	get := func(client *http.Client) int {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet,
			s.ClientConfig.Host+"/apis/example.com/v1/namespaces/front-proxy/databases", nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		return resp.StatusCode
	}

	oldProxy := proxy(oldCA, "front-proxy-client", "system:masters")
	for range 3 {
		require.Equal(t, http.StatusOK, get(oldProxy))
	}
	require.Equal(t, http.StatusForbidden, get(proxy(oldCA, "front-proxy-client", "developers")),
		"alice is authenticated, as a user the server does not authorize by itself")
	require.Equal(t, http.StatusUnauthorized, get(proxy(oldCA, "someone-else", "system:masters")), "a name not allowed")
	newProxy := proxy(newCA, "front-proxy-client", "system:masters")
	require.Equal(t, http.StatusUnauthorized, get(newProxy), "the new CA is not trusted yet")

	require.NoError(t, os.WriteFile(caFile, newCA.pem, 0o600))
	require.Eventually(t, func() bool { return get(oldProxy) == http.StatusUnauthorized },
		90*time.Second, 100*time.Millisecond, "the old CA's certificate is refused after the rotation")
	require.Equal(t, http.StatusOK, get(newProxy))
	require.Equal(t, http.StatusUnauthorized, get(oldProxy))
}
