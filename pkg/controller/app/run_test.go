package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	certutil "k8s.io/client-go/util/cert"

	"example.com/database-apiserver/internal/pki"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/authnready"
	dbfake "example.com/database-apiserver/pkg/generated/clientset/versioned/fake"
)

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// clientCA is a CA for client certificates, written to caFile for --client-ca-file.
type clientCA struct {
	ca     *pki.KeyPair
	caFile string
}

func newClientCA(t *testing.T) clientCA {
	t.Helper()
	ca, err := pki.NewCA(pki.Template{CommonName: "test-client-ca", Validity: time.Hour})
	require.NoError(t, err)
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	require.NoError(t, os.WriteFile(caFile, ca.CertPEM(), 0o600))
	return clientCA{ca: ca, caFile: caFile}
}

// cert issues a client certificate for user in groups.
func (c clientCA) cert(t *testing.T, user string, groups ...string) tls.Certificate {
	t.Helper()
	kp, err := c.ca.Sign(pki.Template{CommonName: user, Organization: groups, Validity: time.Hour,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{kp.Cert.Raw}, PrivateKey: kp.Key}
}

// serving parses args with a free --secure-port on 127.0.0.1 and --client-ca-file of ca,
// and returns the options with the Config's secure server set up (ApplyServing), on fake
// clientsets.
func serving(t *testing.T, ca clientCA, args ...string) (*Options, *Config, *kubefake.Clientset) {
	t.Helper()
	o := parse(t, append([]string{"--bind-address=127.0.0.1", "--secure-port=" + freePort(t),
		"--client-ca-file=" + ca.caFile, "--authentication-skip-lookup"}, args...)...)
	require.NoError(t, o.Validate())
	kube := kubefake.NewClientset()
	c := &Config{Options: o, Kube: kube, Databases: dbfake.NewClientset(), LeaderElection: kube, Identity: "test_1"}
	require.NoError(t, o.ApplyServing(c))
	return o, c, kube
}

// httpsClient trusts the server's self-signed certificate and presents cert, if any.
func httpsClient(t *testing.T, o *Options, cert *tls.Certificate) *http.Client {
	t.Helper()
	require.NotNil(t, o.SecureServing.ServerCert.GeneratedCert, "a self-signed certificate in memory")
	certPEM, _ := o.SecureServing.ServerCert.GeneratedCert.CurrentCertKeyContent()
	pool, err := certutil.NewPoolFromBytes(certPEM)
	require.NoError(t, err)
	tlsConfig := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		tlsConfig.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
}

func baseURL(o *Options) string {
	return "https://" + net.JoinHostPort(o.SecureServing.BindAddress.String(), strconv.Itoa(o.SecureServing.BindPort))
}

func get(client *http.Client, url string) (int, string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// waitOK polls url until it answers 200 OK.
func waitOK(t *testing.T, client *http.Client, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body, err := get(client, url)
		if err == nil && code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %s %v", url, code, body, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRunLeadsServesProbesAndReleasesTheLease runs the whole command's Run on fake clientsets:
// it takes the Lease, reports ready once the caches synced, serves metrics and pprof over
// HTTPS to a member of system:masters (authorized without kube-apiserver, as
// kube-controller-manager does), and on shutdown returns nil and gives the Lease up for the
// next replica.
func TestRunLeadsServesProbesAndReleasesTheLease(t *testing.T) {
	ca := newClientCA(t)
	o, c, kube := serving(t, ca, "--profiling",
		"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=200ms")
	admin := ca.cert(t, "admin", "system:masters")
	client := httpsClient(t, o, &admin)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	base := baseURL(o)
	waitOK(t, client, base+"/readyz")
	require.Eventually(t, func() bool {
		lease, err := kube.CoordinationV1().Leases("database-system").Get(ctx, "database-controller", metav1.GetOptions{})
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == "test_1"
	}, 30*time.Second, 100*time.Millisecond, "the Lease is never taken")

	code, body, err := get(client, base+"/healthz?verbose")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "leaderElection ok")
	code, body, err = get(client, base+"/metrics")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `workqueue_adds_total{name="database-controller"}`)
	require.Contains(t, body, `leader_election_master_status{name="database-controller"} 1`)
	code, _, err = get(client, base+"/debug/pprof/")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)

	stopRun(t, cancel, done)
	lease, err := kube.CoordinationV1().Leases("database-system").Get(context.Background(), "database-controller", metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "", "the Lease is released")
	_, _, err = get(client, base+"/healthz")
	require.Error(t, err, "the health server is shut down")
}

// TestSecurePortServesProbesToAnyoneAndMetricsOnlyToTheAuthorized pins the filters: without
// kube-apiserver to ask (no authorization kubeconfig), only the always-allowed paths and the
// group system:masters pass; an anonymous request and a user outside that group get 403 for
// /metrics and /debug/pprof, and plain HTTP is refused.
func TestSecurePortServesProbesToAnyoneAndMetricsOnlyToTheAuthorized(t *testing.T) {
	ca := newClientCA(t)
	o, c, _ := serving(t, ca, "--profiling", "--leader-elect=false")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	base := baseURL(o)
	anonymous := httpsClient(t, o, nil)
	waitOK(t, anonymous, base+"/readyz")

	for _, path := range []string{"/healthz", "/readyz", "/livez"} {
		code, body, err := get(anonymous, base+path)
		require.NoError(t, err)
		if path == "/livez" {
			require.Equal(t, http.StatusNotFound, code, "authorized, but not served")
			continue
		}
		require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
	}
	someone := ca.cert(t, "someone", "system:authenticated")
	for name, client := range map[string]*http.Client{"anonymous": anonymous, "someone": httpsClient(t, o, &someone)} {
		for _, path := range []string{"/metrics", "/debug/pprof/"} {
			code, body, err := get(client, base+path)
			require.NoError(t, err)
			require.Equal(t, http.StatusForbidden, code, "%s %s: %s", name, path, body)
		}
	}
	code, body, err := get(anonymous, base+"/metrics")
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, body, `"system:anonymous\" cannot get path \"/metrics\"`)

	code, _, err = get(&http.Client{Timeout: 10 * time.Second}, "http://"+strings.TrimPrefix(base, "https://")+"/metrics")
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, code, "plain HTTP is refused")

	stopRun(t, cancel, done)
}

// TestApplyServingKeepsTheSelfSignedCertificateInCertDir: with --cert-dir, the generated
// pair is written there as database-controller.{crt,key}, valid for localhost and 127.0.0.1,
// and reused by the next start.
func TestApplyServingKeepsTheSelfSignedCertificateInCertDir(t *testing.T) {
	dir := t.TempDir()
	ca := newClientCA(t)
	o, c, _ := serving(t, ca, "--cert-dir="+dir)
	require.NoError(t, c.SecureServing.Listener.Close())
	certs, err := certutil.CertsFromFile(filepath.Join(dir, "database-controller.crt"))
	require.NoError(t, err)
	require.NoError(t, certs[0].VerifyHostname("127.0.0.1"))
	require.NoError(t, certs[0].VerifyHostname("localhost"))
	require.Equal(t, filepath.Join(dir, "database-controller.crt"), o.SecureServing.ServerCert.CertKey.CertFile)

	_, c, _ = serving(t, ca, "--cert-dir="+dir)
	require.NoError(t, c.SecureServing.Listener.Close())
	again, err := certutil.CertsFromFile(filepath.Join(dir, "database-controller.crt"))
	require.NoError(t, err)
	require.Equal(t, certs[0].Raw, again[0].Raw, "the pair in --cert-dir is reused")
}

// TestSecurePortZeroServesNothing: --secure-port=0 (or the deprecated
// --health-probe-bind-address=0) starts no server and needs no certificate.
func TestSecurePortZeroServesNothing(t *testing.T) {
	for _, arg := range []string{"--secure-port=0", "--health-probe-bind-address=0"} {
		o := parse(t, arg)
		require.NoError(t, o.Validate())
		c := &Config{Options: o}
		require.NoError(t, o.ApplyServing(c))
		require.Nil(t, c.SecureServing, arg)
	}
}

// TestRunCampaignsAgainAfterLosingTheLease plays a kube-apiserver outage longer than the renew
// deadline, as seen by leader election: every Lease request fails. The leader stops its
// workers (a Database created meanwhile is not reconciled), Run does not return, and once the
// Lease can be written again the process leads again and reconciles what it missed.
func TestRunCampaignsAgainAfterLosingTheLease(t *testing.T) {
	ca := newClientCA(t)
	o, c, kube := serving(t, ca,
		"--leader-elect-lease-duration=2s", "--leader-elect-renew-deadline=1s", "--leader-elect-retry-period=200ms")
	admin := ca.cert(t, "admin", "system:masters")
	client := httpsClient(t, o, &admin)
	var outage atomic.Bool
	kube.PrependReactor("*", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if outage.Load() {
			return true, nil, apierrors.NewServiceUnavailable("kube-apiserver is down")
		}
		return false, nil, nil
	})
	databases := dbfake.NewClientset()
	// A worker's first write to a Database is its finalizer: the names written so far.
	var written sync.Map
	databases.PrependReactor("update", "databases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		written.Store(a.(clienttesting.UpdateAction).GetObject().(metav1.Object).GetName(), true)
		return false, nil, nil
	})
	reconciled := func(name string) func() bool {
		return func() bool {
			_, ok := written.Load(name)
			return ok
		}
	}

	c.Databases = databases

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	base := baseURL(o)
	masterStatus := func(value string) func() bool {
		return func() bool {
			_, body, err := get(client, base+"/metrics")
			return err == nil && strings.Contains(body, `leader_election_master_status{name="database-controller"} `+value+"\n")
		}
	}
	create := func(name string) { // the fake's Create needs an OpenAPI schema, its tracker not
		require.NoError(t, databases.Tracker().Add(&examplev1.Database{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       examplev1.DatabaseSpec{Engine: examplev1.EnginePostgreSQL, Version: "16"},
		}))
	}
	require.Eventually(t, masterStatus("1"), 30*time.Second, 100*time.Millisecond, "never leads")
	create("before")
	require.Eventually(t, reconciled("before"), 30*time.Second, 100*time.Millisecond)

	// The term that campaigns after the Lease is lost lists Databases with new informers:
	// its list waits until "during" exists, so that its queue holds "during" once its
	// informers have synced (/readyz/informer-sync, failing while the list waits).
	var holdLists atomic.Bool
	listing := make(chan struct{}, 1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseLists := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseLists)
	databases.PrependReactor("list", "databases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if holdLists.Load() {
			select {
			case listing <- struct{}{}:
			default:
			}
			<-release
		}
		return false, nil, nil
	})
	informersSynced := func() bool {
		code, _, err := get(client, base+"/readyz/informer-sync")
		return err == nil && code == http.StatusOK
	}

	holdLists.Store(true)
	outage.Store(true)
	require.Eventually(t, masterStatus("0"), 30*time.Second, 100*time.Millisecond, "still leads without renewing")
	select {
	case <-listing:
	case <-time.After(30 * time.Second):
		t.Fatal("no new term lists Databases after the Lease was lost")
	}
	require.Eventually(t, func() bool { return !informersSynced() }, 30*time.Second, 50*time.Millisecond,
		"the term whose list waits is not the current one")
	create("during")
	holdLists.Store(false)
	releaseLists()
	require.Eventually(t, informersSynced, 30*time.Second, 50*time.Millisecond, "the new term's informers never sync")
	// "during" is in the queue of a term that does not lead: no worker takes it.
	require.Never(t, reconciled("during"), 2*time.Second, 100*time.Millisecond, "a worker runs without the Lease")
	select {
	case err := <-done:
		t.Fatalf("Run returned after losing the Lease: %v", err)
	default:
	}

	outage.Store(false)
	require.Eventually(t, reconciled("during"), 30*time.Second, 100*time.Millisecond, "never reconciled after the outage")
	require.True(t, masterStatus("1")())
	lease, err := kube.CoordinationV1().Leases("database-system").Get(ctx, "database-controller", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "test_1", *lease.Spec.HolderIdentity)
	waitOK(t, client, base+"/readyz")

	stopRun(t, cancel, done)
}

// stopRun ends Run's context with cancel and requires Run, whose result arrives on done, to
// return nil within 30 s.
func stopRun(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestSecurePortWaitsForTheClientCANotTheFrontProxyCA wires the secure port as the delegated
// authentication does without --client-ca-file: the client CA and the front-proxy CA come
// from kube-system/extension-apiserver-authentication through an informer each, and the TLS
// handshake offers what has loaded. While only the front-proxy CA has, a client does not
// send the certificate the client CA signed, so a request is held back with a 503 (not
// refused as system:anonymous with a 403); once the client CA loads, it is served.
func TestSecurePortWaitsForTheClientCANotTheFrontProxyCA(t *testing.T) {
	ca := newClientCA(t)
	o, c, _ := serving(t, ca, "--leader-elect=false")
	frontProxyCA, err := pki.NewCA(pki.Template{CommonName: "test-front-proxy-ca", Validity: time.Hour})
	require.NoError(t, err)
	authentication := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: authnready.AuthenticationConfigMapNamespace, Name: authnready.AuthenticationConfigMapName}, Data: data}
	}
	published := map[string]string{
		"client-ca-file":               string(ca.ca.CertPEM()),
		"requestheader-client-ca-file": string(frontProxyCA.CertPEM()),
	}
	// What kube-apiserver publishes, and what each informer has seen of it so far.
	c.Kube = kubefake.NewClientset(authentication(published))
	clientSeen := kubefake.NewClientset(authentication(nil))
	frontProxySeen := kubefake.NewClientset(authentication(published))
	caFrom := func(key string, client *kubefake.Clientset) dynamiccertificates.CAContentProvider {
		p, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca",
			authnready.AuthenticationConfigMapNamespace, authnready.AuthenticationConfigMapName, key, client)
		require.NoError(t, err)
		return p
	}
	clientProvider := caFrom("client-ca-file", clientSeen)
	frontProxyProvider := caFrom("requestheader-client-ca-file", frontProxySeen)
	c.SecureServing.ClientCA = nil
	require.NoError(t, c.Authentication.ApplyClientCert(clientProvider, c.SecureServing))
	none := headerrequest.StaticStringSlice{}
	c.Authentication.RequestHeaderConfig = &authenticatorfactory.RequestHeaderConfig{CAContentProvider: frontProxyProvider,
		UsernameHeaders: none, UIDHeaders: none, GroupHeaders: none, ExtraHeaderPrefixes: none, AllowedClientNames: none}
	require.NoError(t, c.Authentication.ApplyClientCert(frontProxyProvider, c.SecureServing))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped, err := c.serveHealth(ctx, func() bool { return true }, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(frontProxyProvider.CurrentCABundleContent()) > 0 },
		30*time.Second, 50*time.Millisecond, "the front-proxy CA never loads")

	admin := ca.cert(t, "admin", "system:masters")
	base := baseURL(o)
	code, body, err := get(httpsClient(t, o, &admin), base+"/metrics")
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, "the client CA is not loaded yet")
	code, body, err = get(httpsClient(t, o, nil), base+"/readyz")
	require.NoError(t, err)
	require.Equal(t, http.StatusInternalServerError, code, body)
	require.Contains(t, body, "[-]client-ca failed")

	_, err = clientSeen.CoreV1().ConfigMaps(authnready.AuthenticationConfigMapNamespace).Update(ctx,
		authentication(published), metav1.UpdateOptions{})
	require.NoError(t, err)
	waitOK(t, httpsClient(t, o, &admin), base+"/metrics")

	cancel()
	<-stopped
}
