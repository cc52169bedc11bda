package localcluster

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/keyutil"

	"example.com/database-apiserver/internal/pki"
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
type keyPair = pki.KeyPair

// Validity of the certificates the local cluster issues.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 5 * 365 * 24 * time.Hour
)

// clusterPKI holds every CA, certificate and key of the local cluster.
type clusterPKI struct {
	dir string

	ClientCA     *keyPair // signs client certs kube-apiserver accepts (--client-ca-file)
	FrontProxyCA *keyPair // signs only the front-proxy client cert (--requestheader-client-ca-file)
	ServingCA    *keyPair // signs serving certs; the kubeconfig and the APIService caBundle trust it

	KubeAPIServer   *keyPair // serving
	APIServer       *keyPair // our server's serving cert
	Controller      *keyPair // database-controller's serving cert (127.0.0.1, localhost)
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
func loadOrCreatePKI(dir string) (*clusterPKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &clusterPKI{dir: dir}
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
	serviceAccounts := []string{"system:serviceaccounts", "system:serviceaccounts:" + APIServerNamespace}
	leaves := []struct {
		out  **keyPair
		name string
		ca   *keyPair
		tmpl pki.Template
	}{
		{&p.KubeAPIServer, "kube-apiserver", p.ServingCA, pki.Template{CommonName: "kube-apiserver",
			ExtKeyUsage: serving,
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
			IPAddresses: append([]net.IP{net.ParseIP(kubernetesServiceIP)}, loopback...)}},
		{&p.APIServer, "database-apiserver", p.ServingCA, pki.Template{CommonName: APIServerServiceName,
			ExtKeyUsage: serving,
			DNSNames: []string{
				APIServerServiceName + "." + APIServerNamespace + ".svc",
				APIServerServiceName + "." + APIServerNamespace + ".svc.cluster.local",
				"localhost"},
			IPAddresses: loopback}},
		{&p.Controller, "database-controller", p.ServingCA, pki.Template{CommonName: ControllerServiceAccount,
			ExtKeyUsage: serving, DNSNames: []string{"localhost"}, IPAddresses: loopback}},
		{&p.FrontProxy, "front-proxy-client", p.FrontProxyCA,
			pki.Template{CommonName: FrontProxyClientName, ExtKeyUsage: client}},
		{&p.Admin, "admin", p.ClientCA,
			pki.Template{CommonName: "admin", Organization: []string{"system:masters"}, ExtKeyUsage: client}},
		{&p.ControllerMgr, "kube-controller-manager", p.ClientCA,
			pki.Template{CommonName: "system:kube-controller-manager", ExtKeyUsage: client}},
		{&p.Scheduler, "kube-scheduler", p.ClientCA,
			pki.Template{CommonName: "system:kube-scheduler", ExtKeyUsage: client}},
		{&p.APIServerAuthn, "database-apiserver-client", p.ClientCA,
			pki.Template{CommonName: APIServerUser, Organization: serviceAccounts, ExtKeyUsage: client}},
		{&p.ControllerAuthn, "database-controller-client", p.ClientCA,
			pki.Template{CommonName: ControllerUser, Organization: serviceAccounts, ExtKeyUsage: client}},
	}
	for _, l := range leaves {
		kp, err := p.leaf(l.name, l.ca, l.tmpl)
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
func (p *clusterPKI) ClientCert(name, user string, groups ...string) (*keyPair, error) {
	return p.leaf("user-"+name, p.ClientCA, pki.Template{CommonName: user, Organization: groups,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// ca returns the CA <name>, creating it with common name cn if it is missing.
func (p *clusterPKI) ca(name, cn string) (*keyPair, error) {
	return p.loadOr(name, func() (*keyPair, error) {
		return pki.NewCA(pki.Template{CommonName: cn, Validity: caValidity})
	})
}

// leaf returns the certificate <name>, issuing it from tmpl and ca if it is missing.
func (p *clusterPKI) leaf(name string, ca *keyPair, tmpl pki.Template) (*keyPair, error) {
	return p.loadOr(name, func() (*keyPair, error) {
		tmpl.Validity = leafValidity
		kp, err := ca.Sign(tmpl)
		if err != nil {
			return nil, fmt.Errorf("signing %s: %w", name, err)
		}
		return kp, nil
	})
}

// loadOr returns the key pair <name> under the PKI directory as it is, or, when it is missing,
// the one issue makes, stored there.
func (p *clusterPKI) loadOr(name string, issue func() (*keyPair, error)) (*keyPair, error) {
	if kp, err := pki.Load(p.dir, name); kp != nil || err != nil {
		return kp, err
	}
	kp, err := issue()
	if err != nil {
		return nil, err
	}
	return pki.Store(p.dir, name, kp)
}

func writePEM(path, blockType string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600)
}
