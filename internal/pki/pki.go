// Package pki issues and keeps X.509 certificates as PEM files, for the two places that make
// their own: hack/gen-certs (the certificates of a real install) and internal/localcluster
// (the local control plane). Both keep a certificate and its key as <name>.crt and <name>.key
// in one directory, with ECDSA P-256 keys.
//
// It decides nothing about when to reissue: Load says what exists, NewCA and Sign make new
// key pairs in memory, Store writes them.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Backdate is how long before "now" a new certificate becomes valid, to tolerate clock skew
// between the machine that issues it and those that verify it.
const Backdate = time.Hour

// KeyPair is a certificate and its private key. CertFile and KeyFile are where they are
// stored (<dir>/<name>.crt and <dir>/<name>.key), empty for a key pair made by NewCA or Sign
// and not stored yet.
type KeyPair struct {
	Cert     *x509.Certificate
	Key      crypto.Signer
	CertFile string
	KeyFile  string
}

// CertPEM returns the certificate as one PEM block ("CERTIFICATE").
func (kp *KeyPair) CertPEM() []byte {
	b, _ := certutil.EncodeCertificates(kp.Cert) // encoding a parsed certificate cannot fail
	return b
}

// KeyPEM returns the private key as PEM (SEC 1 "EC PRIVATE KEY" for ECDSA); it fails only for
// a key type keyutil cannot marshal.
func (kp *KeyPair) KeyPEM() ([]byte, error) {
	return keyutil.MarshalPrivateKeyToPEM(kp.Key)
}

// Files returns the paths of <dir>/<name>.crt and <dir>/<name>.key.
func Files(dir, name string) (certFile, keyFile string) {
	return filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
}

// Load reads <dir>/<name>.crt (the first certificate in it) and <dir>/<name>.key. It returns
// nil, nil when either file does not exist, so that the caller issues the pair; any other
// problem (unreadable or unparsable file, a key that cannot sign) is an error.
func Load(dir, name string) (*KeyPair, error) {
	certFile, keyFile := Files(dir, name)
	certs, err := certutil.CertsFromFile(certFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	key, err := keyutil.PrivateKeyFromFile(keyFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: not a signing key", keyFile)
	}
	return &KeyPair{Cert: certs[0], Key: signer, CertFile: certFile, KeyFile: keyFile}, nil
}

// Store writes kp's key to <dir>/<name>.key (mode 0600) and then its certificate to
// <dir>/<name>.crt (mode 0644), creating dir (0755) if missing and replacing existing files.
// It returns a copy of kp with CertFile and KeyFile set; kp itself is not changed.
func Store(dir, name string, kp *KeyPair) (*KeyPair, error) {
	certFile, keyFile := Files(dir, name)
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return nil, err
	}
	if err := keyutil.WriteKey(keyFile, keyPEM); err != nil {
		return nil, err
	}
	if err := certutil.WriteCert(certFile, kp.CertPEM()); err != nil {
		return nil, err
	}
	return &KeyPair{Cert: kp.Cert, Key: kp.Key, CertFile: certFile, KeyFile: keyFile}, nil
}

// Template is what a new certificate says.
type Template struct {
	CommonName   string
	Organization []string // the subject's O=, e.g. the groups of a Kubernetes client certificate
	DNSNames     []string
	IPAddresses  []net.IP
	// ExtKeyUsage is what a leaf certificate serves for (server auth, client auth); NewCA
	// ignores it.
	ExtKeyUsage []x509.ExtKeyUsage
	// Validity is how long the certificate is valid from Now (a zero or negative one makes
	// a certificate that has already expired). It is valid from Now-Backdate.
	Validity time.Duration
	// Now is the issuing time; zero means time.Now().
	Now time.Time
}

// certificate returns a new ECDSA P-256 key and the part of its certificate CAs and leaves
// share: a random serial, t's subject and names, valid from t.Now-Backdate for t.Validity.
func (t Template) certificate() (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := Serial()
	if err != nil {
		return nil, nil, err
	}
	now := t.Now
	if now.IsZero() {
		now = time.Now()
	}
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: t.CommonName, Organization: t.Organization},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(t.Validity),
		BasicConstraintsValid: true,
		DNSNames:              t.DNSNames,
		IPAddresses:           t.IPAddresses,
	}, key, nil
}

// NewCA returns a new self-signed CA certificate (key usages cert sign, CRL sign and digital
// signature) and its new ECDSA P-256 key, not stored yet. Its subject and names come from t;
// t.ExtKeyUsage is ignored.
func NewCA(t Template) (*KeyPair, error) {
	tmpl, key, err := t.certificate()
	if err != nil {
		return nil, err
	}
	tmpl.IsCA = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	return create(tmpl, tmpl, key, key)
}

// Sign returns a new leaf certificate for t, signed by the CA ca, and its new ECDSA P-256 key,
// not stored yet. The certificate is not a CA, its key usage is digital signature, and it
// expires at the latest when ca does: a Validity reaching past ca.Cert.NotAfter is cut there.
// It fails if ca's key does not match its certificate or cannot sign.
func (ca *KeyPair) Sign(t Template) (*KeyPair, error) {
	tmpl, key, err := t.certificate()
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = t.ExtKeyUsage
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	return create(tmpl, ca.Cert, key, ca.Key)
}

// create signs tmpl for key with parent and signer, and parses the result back.
func create(tmpl, parent *x509.Certificate, key, signer crypto.Signer) (*KeyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// Serial returns a uniformly random serial number in [0, 2^127): at most 16 bytes, well within
// RFC 5280's 20, and never negative. It fails only if crypto/rand does.
func Serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}
