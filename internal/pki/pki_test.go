package pki

import (
	"crypto/x509"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newTestCA(t *testing.T, now time.Time, validity time.Duration) *KeyPair {
	t.Helper()
	ca, err := NewCA(Template{CommonName: "test-ca", Validity: validity, Now: now})
	require.NoError(t, err)
	return ca
}

func TestNewCA(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		tmpl Template
	}{
		{"common name only", Template{CommonName: "serving-ca", Validity: 10 * 365 * 24 * time.Hour, Now: now}},
		{"organization", Template{CommonName: "client-ca", Organization: []string{"example"}, Validity: time.Hour, Now: now}},
		{"extended key usage is ignored", Template{CommonName: "ca", Validity: time.Hour, Now: now,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca, err := NewCA(tc.tmpl)
			require.NoError(t, err)
			require.True(t, ca.Cert.IsCA)
			require.True(t, ca.Cert.BasicConstraintsValid)
			require.Equal(t, x509.KeyUsageCertSign|x509.KeyUsageCRLSign|x509.KeyUsageDigitalSignature, ca.Cert.KeyUsage)
			require.Empty(t, ca.Cert.ExtKeyUsage)
			require.Equal(t, tc.tmpl.CommonName, ca.Cert.Subject.CommonName)
			require.Equal(t, tc.tmpl.Organization, ca.Cert.Subject.Organization)
			require.Equal(t, tc.tmpl.CommonName, ca.Cert.Issuer.CommonName, "self-signed")
			require.NoError(t, ca.Cert.CheckSignatureFrom(ca.Cert))
			require.Equal(t, now.Add(-Backdate), ca.Cert.NotBefore)
			require.Equal(t, now.Add(tc.tmpl.Validity), ca.Cert.NotAfter)
			require.Equal(t, ca.Key.Public(), ca.Cert.PublicKey)
			require.Empty(t, ca.CertFile, "not stored")
			require.Empty(t, ca.KeyFile, "not stored")
		})
	}
}

func TestNewCAWithoutNowUsesTheClock(t *testing.T) {
	before := time.Now().Truncate(time.Second) // certificates carry whole seconds
	ca, err := NewCA(Template{CommonName: "ca", Validity: time.Hour})
	require.NoError(t, err)
	require.False(t, ca.Cert.NotBefore.Before(before.Add(-Backdate)))
	require.False(t, ca.Cert.NotAfter.After(time.Now().Add(time.Hour)))
}

func TestSign(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ca := newTestCA(t, now, 10*24*time.Hour)
	for _, tc := range []struct {
		name         string
		tmpl         Template
		host         string // verified as a server name when not empty
		usage        x509.ExtKeyUsage
		wantNotAfter time.Time
	}{
		{
			name: "serving",
			tmpl: Template{CommonName: "database-apiserver", ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
				DNSNames:    []string{"database-apiserver.database-system.svc", "localhost"},
				IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, Validity: 24 * time.Hour, Now: now},
			host: "database-apiserver.database-system.svc", usage: x509.ExtKeyUsageServerAuth,
			wantNotAfter: now.Add(24 * time.Hour),
		},
		{
			name: "client with groups",
			tmpl: Template{CommonName: "admin", Organization: []string{"system:masters"},
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, Validity: 24 * time.Hour, Now: now},
			usage: x509.ExtKeyUsageClientAuth, wantNotAfter: now.Add(24 * time.Hour),
		},
		{
			name: "server and client",
			tmpl: Template{CommonName: "etcd-peer", DNSNames: []string{"*.etcd.ns.svc"}, Validity: time.Hour, Now: now,
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
			host: "etcd-0.etcd.ns.svc", usage: x509.ExtKeyUsageClientAuth, wantNotAfter: now.Add(time.Hour),
		},
		{
			name: "cut at the CA's expiry",
			tmpl: Template{CommonName: "long", ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
				Validity: 365 * 24 * time.Hour, Now: now},
			usage: x509.ExtKeyUsageClientAuth, wantNotAfter: ca.Cert.NotAfter,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kp, err := ca.Sign(tc.tmpl)
			require.NoError(t, err)
			c := kp.Cert
			require.False(t, c.IsCA)
			require.True(t, c.BasicConstraintsValid)
			require.Equal(t, x509.KeyUsageDigitalSignature, c.KeyUsage)
			require.Equal(t, tc.tmpl.ExtKeyUsage, c.ExtKeyUsage)
			require.Equal(t, tc.tmpl.CommonName, c.Subject.CommonName)
			require.Equal(t, tc.tmpl.Organization, c.Subject.Organization)
			require.Equal(t, tc.tmpl.DNSNames, c.DNSNames)
			require.Len(t, c.IPAddresses, len(tc.tmpl.IPAddresses))
			for i, ip := range tc.tmpl.IPAddresses {
				require.True(t, ip.Equal(c.IPAddresses[i]), "IP %d: %v", i, c.IPAddresses[i])
			}
			require.Equal(t, now.Add(-Backdate), c.NotBefore)
			require.Equal(t, tc.wantNotAfter, c.NotAfter)
			require.Equal(t, kp.Key.Public(), c.PublicKey)
			require.NotEqual(t, ca.Key.Public(), c.PublicKey, "a new key")

			roots := x509.NewCertPool()
			roots.AddCert(ca.Cert)
			_, err = c.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.host, CurrentTime: now,
				KeyUsages: []x509.ExtKeyUsage{tc.usage}})
			require.NoError(t, err)
		})
	}
}

func TestSignWithAnotherCAsKeyFails(t *testing.T) {
	now := time.Now()
	ca, other := newTestCA(t, now, time.Hour), newTestCA(t, now, time.Hour)
	mismatched := &KeyPair{Cert: ca.Cert, Key: other.Key}
	_, err := mismatched.Sign(Template{CommonName: "leaf", Validity: time.Hour, Now: now})
	require.Error(t, err)
}

func TestStoreThenLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki") // Store creates it
	ca := newTestCA(t, time.Now(), time.Hour)

	stored, err := Store(dir, "serving-ca", ca)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "serving-ca.crt"), stored.CertFile)
	require.Equal(t, filepath.Join(dir, "serving-ca.key"), stored.KeyFile)
	require.Same(t, ca.Cert, stored.Cert)
	require.Empty(t, ca.CertFile, "Store leaves its argument alone")

	for file, mode := range map[string]os.FileMode{stored.KeyFile: 0o600, stored.CertFile: 0o644} {
		info, err := os.Stat(file)
		require.NoError(t, err)
		require.Equal(t, mode, info.Mode().Perm(), file)
	}
	data, err := os.ReadFile(stored.CertFile)
	require.NoError(t, err)
	require.Equal(t, ca.CertPEM(), data)
	keyPEM, err := ca.KeyPEM()
	require.NoError(t, err)
	data, err = os.ReadFile(stored.KeyFile)
	require.NoError(t, err)
	require.Equal(t, keyPEM, data)

	loaded, err := Load(dir, "serving-ca")
	require.NoError(t, err)
	require.NotNil(t, loaded)
	require.Equal(t, stored.CertFile, loaded.CertFile)
	require.Equal(t, stored.KeyFile, loaded.KeyFile)
	require.True(t, ca.Cert.Equal(loaded.Cert))
	require.Equal(t, ca.Key.Public(), loaded.Key.Public())

	// What Load returns signs as the original does.
	leaf, err := loaded.Sign(Template{CommonName: "leaf", Validity: time.Minute})
	require.NoError(t, err)
	require.NoError(t, leaf.Cert.CheckSignatureFrom(ca.Cert))
}

func TestStoreReplacesExistingFiles(t *testing.T) {
	dir := t.TempDir()
	first, second := newTestCA(t, time.Now(), time.Hour), newTestCA(t, time.Now(), time.Hour)
	_, err := Store(dir, "ca", first)
	require.NoError(t, err)
	_, err = Store(dir, "ca", second)
	require.NoError(t, err)
	loaded, err := Load(dir, "ca")
	require.NoError(t, err)
	require.True(t, second.Cert.Equal(loaded.Cert))
	require.Equal(t, second.Key.Public(), loaded.Key.Public())
}

func TestLoad(t *testing.T) {
	ca := newTestCA(t, time.Now(), time.Hour)
	keyPEM, err := ca.KeyPEM()
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		files   map[string][]byte // written under the directory before Load(dir, "x")
		wantNil bool
		wantErr string
	}{
		{name: "neither file", wantNil: true},
		{name: "only the certificate", files: map[string][]byte{"x.crt": ca.CertPEM()}, wantNil: true},
		{name: "only the key", files: map[string][]byte{"x.key": keyPEM}, wantNil: true},
		{name: "both", files: map[string][]byte{"x.crt": ca.CertPEM(), "x.key": keyPEM}},
		{name: "another name's files", files: map[string][]byte{"y.crt": ca.CertPEM(), "y.key": keyPEM}, wantNil: true},
		{name: "garbage certificate", files: map[string][]byte{"x.crt": []byte("not PEM"), "x.key": keyPEM},
			wantErr: "x.crt"},
		{name: "garbage key", files: map[string][]byte{"x.crt": ca.CertPEM(), "x.key": []byte("not PEM")},
			wantErr: "x.key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tc.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
			}
			kp, err := Load(dir, "x")
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.Nil(t, kp)
				return
			}
			require.NoError(t, err)
			if tc.wantNil {
				require.Nil(t, kp)
				return
			}
			require.NotNil(t, kp)
			require.True(t, ca.Cert.Equal(kp.Cert))
		})
	}
}

func TestSerial(t *testing.T) {
	limit := new(big.Int).Lsh(big.NewInt(1), 127)
	seen := map[string]bool{}
	for range 100 {
		n, err := Serial()
		require.NoError(t, err)
		require.GreaterOrEqual(t, n.Sign(), 0)
		require.Negative(t, n.Cmp(limit), "below 2^127")
		require.LessOrEqual(t, len(n.Bytes()), 20, "RFC 5280: at most 20 octets")
		require.False(t, seen[n.String()], "repeated serial %v", n)
		seen[n.String()] = true
	}
}

func TestNewCertificatesHaveDistinctSerials(t *testing.T) {
	now := time.Now()
	ca := newTestCA(t, now, time.Hour)
	leaf, err := ca.Sign(Template{CommonName: "leaf", Validity: time.Hour, Now: now})
	require.NoError(t, err)
	require.NotEqual(t, ca.Cert.SerialNumber, leaf.Cert.SerialNumber)
}
