package localcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
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

// Names of the local cluster's identities. The API server's client identity is the
// ServiceAccount user a real install runs as, so the same RBAC manifests apply locally.
const (
	// APIServerNamespace and APIServerServiceName name the Service the APIService points at;
	// the aggregator verifies our serving cert against <service>.<namespace>.svc.
	APIServerNamespace   = "database-system"
	APIServerServiceName = "database-apiserver"
	// APIServerUser is the user our server authenticates as against kube-apiserver: a client
	// certificate whose CN is the ServiceAccount's user name (see artifacts/rbac).
	APIServerUser = "system:serviceaccount:" + APIServerNamespace + ":" + APIServerServiceName
	// ControllerServiceAccount is the ServiceAccount database-controller runs as in a real
	// install (artifacts/rbac/controller-*.yaml).
	ControllerServiceAccount = "database-controller"
	// ControllerUser is the user database-controller authenticates as: a client certificate
	// whose CN is that ServiceAccount's user name, so its RBAC is the real one.
	ControllerUser = "system:serviceaccount:" + APIServerNamespace + ":" + ControllerServiceAccount
	// FrontProxyClientName is the CN kube-apiserver presents to aggregated servers; it is the
	// only name in --requestheader-allowed-names.
	FrontProxyClientName = "front-proxy-client"
)

// keyPair is a certificate with its private key, as parsed from (or written to) <name>.crt and
// <name>.key under the PKI directory.
type keyPair struct {
	Cert     *x509.Certificate
	Key      crypto.Signer
	CertFile string
	KeyFile  string
}

// CertPEM returns the PEM encoding of the certificate.
func (kp *keyPair) CertPEM() []byte {
	b, _ := certutil.EncodeCertificates(kp.Cert)
	return b
}

// KeyPEM returns the PEM encoding of the private key.
func (kp *keyPair) KeyPEM() ([]byte, error) {
	return keyutil.MarshalPrivateKeyToPEM(kp.Key)
}

// pki holds every CA, certificate and key of the local cluster.
type pki struct {
	dir string

	ClientCA     *keyPair // signs client certs kube-apiserver accepts (--client-ca-file)
	FrontProxyCA *keyPair // signs only the front-proxy client cert (--requestheader-client-ca-file)
	ServingCA    *keyPair // signs serving certs; the kubeconfig and the APIService caBundle trust it

	KubeAPIServer   *keyPair // serving
	APIServer       *keyPair // our server's serving cert
	FrontProxy      *keyPair // kube-apiserver's client cert towards aggregated servers
	Admin           *keyPair // O=system:masters
	ControllerMgr   *keyPair // CN=system:kube-controller-manager
	Scheduler       *keyPair // CN=system:kube-scheduler
	APIServerAuthn  *keyPair // our server's client cert (CN=APIServerUser)
	ControllerAuthn *keyPair // database-controller's client cert (CN=ControllerUser)

	ServiceAccountKey    string // private key file (PEM) signing service account tokens
	ServiceAccountPubKey string // public key file (PEM) verifying them
}

// loadOrCreatePKI reads the PKI under dir, generating whatever is missing. Existing files are
// kept, so a restart on the same state directory presents the same CAs to existing clients.
func loadOrCreatePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}
	var err error
	if p.ClientCA, err = p.ca("client-ca", "local-cluster-client-ca"); err != nil {
		return nil, err
	}
	if p.FrontProxyCA, err = p.ca("front-proxy-ca", "local-cluster-front-proxy-ca"); err != nil {
		return nil, err
	}
	if p.ServingCA, err = p.ca("serving-ca", "local-cluster-serving-ca"); err != nil {
		return nil, err
	}

	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	serving := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	leaves := []struct {
		out   **keyPair
		name  string
		ca    *keyPair
		cn    string
		orgs  []string
		usage []x509.ExtKeyUsage
		dns   []string
		ips   []net.IP
	}{
		{&p.KubeAPIServer, "kube-apiserver", p.ServingCA, "kube-apiserver", nil, serving,
			[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
			append([]net.IP{net.ParseIP(kubernetesServiceIP)}, loopback...)},
		{&p.APIServer, "database-apiserver", p.ServingCA, APIServerServiceName, nil, serving,
			[]string{
				APIServerServiceName + "." + APIServerNamespace + ".svc",
				APIServerServiceName + "." + APIServerNamespace + ".svc.cluster.local",
				"localhost"},
			loopback},
		{&p.FrontProxy, "front-proxy-client", p.FrontProxyCA, FrontProxyClientName, nil, client, nil, nil},
		{&p.Admin, "admin", p.ClientCA, "admin", []string{"system:masters"}, client, nil, nil},
		{&p.ControllerMgr, "kube-controller-manager", p.ClientCA, "system:kube-controller-manager", nil, client, nil, nil},
		{&p.Scheduler, "kube-scheduler", p.ClientCA, "system:kube-scheduler", nil, client, nil, nil},
		{&p.APIServerAuthn, "database-apiserver-client", p.ClientCA, APIServerUser,
			[]string{"system:serviceaccounts", "system:serviceaccounts:" + APIServerNamespace}, client, nil, nil},
		{&p.ControllerAuthn, "database-controller-client", p.ClientCA, ControllerUser,
			[]string{"system:serviceaccounts", "system:serviceaccounts:" + APIServerNamespace}, client, nil, nil},
	}
	for _, l := range leaves {
		kp, err := p.leaf(l.name, l.ca, l.cn, l.orgs, l.usage, l.dns, l.ips)
		if err != nil {
			return nil, err
		}
		*l.out = kp
	}

	p.ServiceAccountKey = filepath.Join(dir, "service-account.key")
	p.ServiceAccountPubKey = filepath.Join(dir, "service-account.pub")
	if _, err := os.Stat(p.ServiceAccountPubKey); err != nil {
		keyPEM, _, err := keyutil.LoadOrGenerateKeyFile(p.ServiceAccountKey)
		if err != nil {
			return nil, err
		}
		key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
		if err != nil {
			return nil, err
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%s: not a signing key", p.ServiceAccountKey)
		}
		der, err := x509.MarshalPKIXPublicKey(signer.Public())
		if err != nil {
			return nil, err
		}
		if err := writePEM(p.ServiceAccountPubKey, "PUBLIC KEY", der); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// ClientCert issues (or reuses) a client certificate signed by the client CA, for a user with
// the given groups. E2e tests use it for users with and without RBAC bindings.
func (p *pki) ClientCert(name, user string, groups ...string) (*keyPair, error) {
	return p.leaf("user-"+name, p.ClientCA, user, groups,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil)
}

func (p *pki) ca(name, cn string) (*keyPair, error) {
	if kp, err := p.load(name); kp != nil || err != nil {
		return kp, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	cert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: cn}, key)
	if err != nil {
		return nil, err
	}
	return p.store(name, cert, key)
}

func (p *pki) leaf(name string, ca *keyPair, cn string, orgs []string, usage []x509.ExtKeyUsage,
	dns []string, ips []net.IP) (*keyPair, error) {
	if kp, err := p.load(name); kp != nil || err != nil {
		return kp, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(5 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           usage,
		BasicConstraintsValid: true,
		DNSNames:              dns,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("signing %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return p.store(name, cert, key)
}

// load returns nil, nil when <name>.crt or <name>.key does not exist yet.
func (p *pki) load(name string) (*keyPair, error) {
	kp := &keyPair{CertFile: filepath.Join(p.dir, name+".crt"), KeyFile: filepath.Join(p.dir, name+".key")}
	certs, err := certutil.CertsFromFile(kp.CertFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	key, err := keyutil.PrivateKeyFromFile(kp.KeyFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: not a signing key", kp.KeyFile)
	}
	kp.Cert, kp.Key = certs[0], signer
	return kp, nil
}

func (p *pki) store(name string, cert *x509.Certificate, key crypto.Signer) (*keyPair, error) {
	kp := &keyPair{Cert: cert, Key: key,
		CertFile: filepath.Join(p.dir, name+".crt"), KeyFile: filepath.Join(p.dir, name+".key")}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, err
	}
	if err := keyutil.WriteKey(kp.KeyFile, keyPEM); err != nil {
		return nil, err
	}
	if err := certutil.WriteCert(kp.CertFile, kp.CertPEM()); err != nil {
		return nil, err
	}
	return kp, nil
}

func writePEM(path, blockType string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600)
}
