// Command gen-certs writes the certificates a real install of database-apiserver needs, as PEM
// files in one directory (by default artifacts/deploy/certs, whose kustomization turns them
// into Secrets and fills the APIService caBundle):
//
//	serving-ca.crt/.key      CA of the API server's serving certificate (the caBundle)
//	apiserver.crt/.key       serving: database-apiserver.<namespace>.svc
//	etcd-ca.crt/.key         CA of every etcd certificate
//	etcd-server.crt/.key     etcd's client-facing serving certificate: *.database-etcd.<namespace>.svc
//	etcd-peer.crt/.key       between members (CN database-etcd-peer, the only CN etcd accepts as a peer)
//	etcd-client.crt/.key     the API server's client certificate for etcd
//	serving-ca-bundle.crt    the CAs to trust: the current one, and during a rotation the next
//	etcd-ca-bundle.crt       or previous one
//
// It needs no openssl. Running it again keeps what is still good: existing CAs, and leaf
// certificates signed by the current CA, with the expected names, and not about to expire (see
// --renew-before). So a second run changes nothing, and `kubectl apply` after it restarts
// nothing. --renew reissues every leaf; --rotate-ca=stage|promote|finish replaces the CAs in
// three steps that never break trust (docs/install.md, "Certificate rotation").
//
// CA private keys stay in the directory and never go into the cluster: keep them safe, they
// sign the next certificates.
package main

import (
	"bytes"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"example.com/database-apiserver/internal/pki"
)

// Names of what the manifests in artifacts/deploy run; certificates name them.
const (
	apiServerService = "database-apiserver"
	etcdService      = "database-etcd"
	// etcdPeerCN is the only CN etcd accepts from a peer (--peer-cert-allowed-cn).
	etcdPeerCN = "database-etcd-peer"
	// etcdClientCN is the API server's identity towards etcd.
	etcdClientCN = "database-apiserver-etcd-client"
)

// Rotation steps of --rotate-ca.
const (
	rotateStage   = "stage"
	rotatePromote = "promote"
	rotateFinish  = "finish"
)

// options are the flags.
type options struct {
	Dir       string
	Namespace string
	// ClusterDomain is the DNS suffix of Services (svc.<ClusterDomain>), added to the SANs.
	ClusterDomain string
	// Validity of leaf certificates and of CAs.
	Validity, CAValidity time.Duration
	// RenewBefore reissues a leaf certificate that expires within this duration.
	RenewBefore time.Duration
	// Renew reissues every leaf certificate.
	Renew bool
	// RotateCA is "", rotateStage, rotatePromote or rotateFinish.
	RotateCA string
	// now is the clock; tests move it.
	now func() time.Time
}

func main() {
	o := options{now: time.Now}
	flag.StringVar(&o.Dir, "dir", filepath.Join("artifacts", "deploy", "certs"),
		"Directory of the PEM files (created if missing).")
	flag.StringVar(&o.Namespace, "namespace", "database-system",
		"Namespace the API server and etcd run in; their certificates name its Services.")
	flag.StringVar(&o.ClusterDomain, "cluster-domain", "cluster.local",
		"The cluster's DNS domain, for the <service>.<namespace>.svc.<domain> names.")
	flag.DurationVar(&o.Validity, "validity", 365*24*time.Hour, "Validity of leaf certificates.")
	flag.DurationVar(&o.CAValidity, "ca-validity", 10*365*24*time.Hour, "Validity of new CAs.")
	flag.DurationVar(&o.RenewBefore, "renew-before", 30*24*time.Hour,
		"Reissue a leaf certificate that expires within this duration.")
	flag.BoolVar(&o.Renew, "renew", false, "Reissue every leaf certificate (new keys), keeping the CAs.")
	flag.StringVar(&o.RotateCA, "rotate-ca", "",
		"Replace the CAs, one step per run, applying the overlay after each: "+
			"stage (create the next CAs and trust them too), "+
			"promote (sign new leaf certificates with them, keep trusting the previous ones), "+
			"finish (stop trusting the previous CAs).")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "gen-certs: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "gen-certs: %v\n", err)
		os.Exit(1)
	}
}

// leafSpec describes one leaf certificate and the CA that signs it.
type leafSpec struct {
	name  string // file name without extension
	ca    string // name of the signing CA
	cn    string
	dns   []string
	ips   []net.IP
	usage []x509.ExtKeyUsage
}

// leaves returns the leaf certificates of an install in namespace ns.
func (o options) leaves() []leafSpec {
	svc := func(name string) []string {
		return []string{name + "." + o.Namespace + ".svc", name + "." + o.Namespace + ".svc." + o.ClusterDomain}
	}
	members := []string{"*." + etcdService + "." + o.Namespace + ".svc",
		"*." + etcdService + "." + o.Namespace + ".svc." + o.ClusterDomain}
	loopback := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	server := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	return []leafSpec{
		// The aggregator verifies <service>.<namespace>.svc.
		{name: "apiserver", ca: "serving-ca", cn: apiServerService, dns: svc(apiServerService), usage: server},
		// Client-facing: each member's name, the Service, and loopback for etcdctl through
		// kubectl port-forward. etcd dials itself (gRPC gateway) with this certificate too,
		// hence client auth.
		{name: "etcd-server", ca: "etcd-ca", cn: etcdService,
			dns: append(append(slices.Clone(members), svc(etcdService)...), "localhost"), ips: loopback, usage: both},
		// Members are servers and clients of each other.
		{name: "etcd-peer", ca: "etcd-ca", cn: etcdPeerCN, dns: members, usage: both},
		// No SANs: etcd would check them against the client's address.
		{name: "etcd-client", ca: "etcd-ca", cn: etcdClientCN, usage: client},
	}
}

// cas are the CAs, by file name.
var cas = []struct{ name, cn string }{
	{"serving-ca", "database-apiserver-serving-ca"},
	{"etcd-ca", "database-etcd-ca"},
}

// run writes the certificates of o into o.Dir and reports what it did on out.
func run(o options, out io.Writer) error {
	if o.now == nil {
		o.now = time.Now
	}
	if o.Namespace == "" {
		return errors.New("--namespace must not be empty")
	}
	if !slices.Contains([]string{"", rotateStage, rotatePromote, rotateFinish}, o.RotateCA) {
		return fmt.Errorf("--rotate-ca must be %s, %s or %s, got %q", rotateStage, rotatePromote, rotateFinish, o.RotateCA)
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return err
	}
	d := dir{path: o.Dir, out: out}

	current := map[string]*pki.KeyPair{}
	renewAll := o.Renew
	for _, ca := range cas {
		kp, err := d.rotate(o, ca.name, ca.cn)
		if err != nil {
			return err
		}
		current[ca.name] = kp
		if o.RotateCA == rotatePromote {
			renewAll = true // every leaf must chain to the promoted CA
		}
	}
	for _, l := range o.leaves() {
		if err := d.leaf(o, l, current[l.ca], renewAll); err != nil {
			return err
		}
	}
	for _, ca := range cas {
		if err := d.bundle(ca.name); err != nil {
			return err
		}
	}
	return nil
}

// dir is the directory of PEM files.
type dir struct {
	path string
	out  io.Writer
}

func (d dir) file(name string) string { return filepath.Join(d.path, name) }

// rotate returns the current CA called name, after creating it if it is missing and taking
// the step o.RotateCA asks for. Around the current CA <name>.crt/.key, a rotation keeps
// <name>-next (staged, not yet signing) and <name>-previous (replaced, still trusted).
func (d dir) rotate(o options, name, cn string) (*pki.KeyPair, error) {
	current, err := pki.Load(d.path, name)
	if err != nil {
		return nil, err
	}
	if current == nil {
		if o.RotateCA != "" {
			return nil, fmt.Errorf("--rotate-ca=%s: no CA %s yet; run without --rotate-ca first", o.RotateCA, d.file(name+".crt"))
		}
		return d.newCA(o, name, cn)
	}
	next, err := pki.Load(d.path, name+"-next")
	if err != nil {
		return nil, err
	}
	previous, err := d.exists(name + "-previous.crt")
	if err != nil {
		return nil, err
	}
	switch o.RotateCA {
	case rotateStage:
		if previous {
			return nil, fmt.Errorf("%s: a rotation is still finishing; run --rotate-ca=%s first", name, rotateFinish)
		}
		if next == nil {
			if _, err := d.newCA(o, name+"-next", cn); err != nil {
				return nil, err
			}
		}
	case rotatePromote:
		if next == nil {
			return nil, fmt.Errorf("%s: nothing staged; run --rotate-ca=%s first", name, rotateStage)
		}
		// The current CA stays trusted (its certificate only; its key signs nothing more).
		if err := os.WriteFile(d.file(name+"-previous.crt"), current.CertPEM(), 0o644); err != nil {
			return nil, err
		}
		if next, err = pki.Store(d.path, name, next); err != nil {
			return nil, err
		}
		for _, f := range []string{name + "-next.crt", name + "-next.key"} {
			if err := removeIfExists(d.file(f)); err != nil {
				return nil, err
			}
		}
		fmt.Fprintf(d.out, "promoted %s-next to %s; %s-previous.crt stays in the bundle\n", name, name, name)
		return next, nil
	case rotateFinish:
		if err := removeIfExists(d.file(name + "-previous.crt")); err != nil {
			return nil, err
		}
		if previous {
			fmt.Fprintf(d.out, "removed %s-previous.crt from the bundle\n", name)
		}
	}
	return current, nil
}

// newCA creates the CA <name>.crt/.key with common name cn.
func (d dir) newCA(o options, name, cn string) (*pki.KeyPair, error) {
	ca, err := pki.NewCA(pki.Template{CommonName: cn, Validity: o.CAValidity, Now: o.now()})
	if err != nil {
		return nil, err
	}
	if ca, err = pki.Store(d.path, name, ca); err != nil {
		return nil, err
	}
	fmt.Fprintf(d.out, "created CA %s (%s, until %s)\n", ca.CertFile, cn, ca.Cert.NotAfter.Format(time.DateOnly))
	return ca, nil
}

// leaf keeps the certificate l if it is still good, and issues it from ca otherwise.
func (d dir) leaf(o options, l leafSpec, ca *pki.KeyPair, renew bool) error {
	existing, err := pki.Load(d.path, l.name)
	if err != nil {
		return err
	}
	reason := "missing"
	if existing != nil {
		reason = o.problem(existing.Cert, l, ca.Cert)
		if reason == "" && renew {
			reason = "renewal asked for"
		}
		if reason == "" {
			fmt.Fprintf(d.out, "kept %s (until %s)\n", existing.CertFile, existing.Cert.NotAfter.Format(time.DateOnly))
			return nil
		}
	}
	// The new certificate expires when the CA does at the latest.
	kp, err := ca.Sign(pki.Template{CommonName: l.cn, DNSNames: l.dns, IPAddresses: l.ips, ExtKeyUsage: l.usage,
		Validity: o.Validity, Now: o.now()})
	if err != nil {
		return fmt.Errorf("signing %s: %w", l.name, err)
	}
	if kp, err = pki.Store(d.path, l.name, kp); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "issued %s (%s; until %s)\n", kp.CertFile, reason, kp.Cert.NotAfter.Format(time.DateOnly))
	return nil
}

// problem says why cert no longer serves as l, or "" if it does.
func (o options) problem(cert *x509.Certificate, l leafSpec, ca *x509.Certificate) string {
	switch {
	case cert.CheckSignatureFrom(ca) != nil:
		return "not signed by the current " + l.ca
	case cert.Subject.CommonName != l.cn:
		return "common name changed"
	case !slices.Equal(cert.DNSNames, l.dns):
		return "DNS names changed"
	case !slices.EqualFunc(cert.IPAddresses, l.ips, net.IP.Equal):
		return "IP addresses changed"
	case !slices.Equal(cert.ExtKeyUsage, l.usage):
		return "key usage changed"
	case cert.NotAfter.Before(o.now().Add(o.RenewBefore)):
		return "expires " + cert.NotAfter.Format(time.DateOnly)
	}
	return ""
}

// bundle writes <name>-bundle.crt: the current CA, then the next or previous one if present.
func (d dir) bundle(name string) error {
	var b bytes.Buffer
	for _, f := range []string{name + ".crt", name + "-next.crt", name + "-previous.crt"} {
		data, err := os.ReadFile(d.file(f))
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		b.Write(data)
	}
	path := d.file(name + "-bundle.crt")
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b.Bytes()) {
		return nil
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return err
	}
	certs, err := certutil.ParseCertsPEM(b.Bytes())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fmt.Fprintf(d.out, "wrote %s (%d CA certificates)\n", path, len(certs))
	return nil
}

func (d dir) exists(name string) (bool, error) {
	_, err := os.Stat(d.file(name))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
