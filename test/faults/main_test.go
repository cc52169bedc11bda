//go:build faults

// Package faults kills the processes the API depends on (etcd members, our
// API servers) under load and checks that no acknowledged write is lost and
// that clients get clear answers. Each etcd member and each API server runs as
// a process of its own, this test binary run again in a role (see TestMain),
// so that it can be SIGKILLed. Run with `make test-faults`.
package faults

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/grpclog"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"example.com/database-apiserver/internal/embedetcd"
	"example.com/database-apiserver/test/integration/framework"
)

// processEnv names the environment variable that holds a child's role, as
// the JSON of a processConfig.
const processEnv = "DATABASE_APISERVER_FAULTS_PROCESS"

// processConfig is what a child process runs: an etcd member or an API server.
type processConfig struct {
	Role string // "etcd" or "apiserver"

	// etcd
	DataDir              string
	Name                 string
	ClientPort, PeerPort int
	InitialCluster       string
	QuotaBackendBytes    int64

	// apiserver
	EtcdServers  []string
	Port         int
	CertDir      string
	ClientCAFile string
}

func TestMain(m *testing.M) {
	if env := os.Getenv(processEnv); env != "" {
		var cfg processConfig
		if err := json.Unmarshal([]byte(env), &cfg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := runProcess(cfg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The test's own etcd clients log every connection refused while a member is down.
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard))
	os.Exit(m.Run())
}

// runProcess runs cfg's role until SIGTERM.
func runProcess(cfg processConfig) error {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	switch cfg.Role {
	case "etcd":
		s, err := embedetcd.Start(embedetcd.Options{DataDir: cfg.DataDir, Name: cfg.Name, ClientPort: cfg.ClientPort,
			PeerPort: cfg.PeerPort, InitialCluster: cfg.InitialCluster, QuotaBackendBytes: cfg.QuotaBackendBytes,
			StartTimeout: 2 * time.Minute})
		if err != nil {
			return err
		}
		<-stop
		s.Stop()
	case "apiserver":
		s, err := framework.StartWith(framework.Options{EtcdServers: cfg.EtcdServers, Port: cfg.Port},
			"--cert-dir="+cfg.CertDir, "--client-ca-file="+cfg.ClientCAFile)
		if err != nil {
			return err
		}
		<-stop
		s.Stop()
	default:
		return fmt.Errorf("unknown role %q", cfg.Role)
	}
	return nil
}

// process is a child process that can be SIGKILLed and started again with
// the same configuration (data directory, ports).
type process struct {
	t   *testing.T
	cfg processConfig
	log string
	cmd *exec.Cmd
}

func startProcess(t *testing.T, cfg processConfig) *process {
	p := &process{t: t, cfg: cfg, log: filepath.Join(t.TempDir(), cfg.Role+".log")}
	p.start()
	t.Cleanup(func() {
		if p.cmd != nil {
			p.kill()
		}
		if t.Failed() {
			data, _ := os.ReadFile(p.log)
			if len(data) > 4000 {
				data = data[len(data)-4000:]
			}
			t.Logf("%s %s log ends:\n%s", cfg.Role, cfg.Name, data)
		}
	})
	return p
}

func (p *process) start() {
	env, err := json.Marshal(p.cfg)
	require.NoError(p.t, err)
	log, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(p.t, err)
	defer log.Close()
	cmd := exec.Command(os.Args[0])
	// The API server's own temporary files go where the test removes them.
	cmd.Env = append(os.Environ(), processEnv+"="+string(env), "TMPDIR="+p.t.TempDir())
	cmd.Stdout, cmd.Stderr = log, log
	// Killed with the test binary if it dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(p.t, cmd.Start())
	p.cmd = cmd
}

// kill SIGKILLs the process and waits for it to exit.
func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
	p.cmd = nil
}

// freePorts returns n loopback ports free at the time of the call.
func freePorts(t *testing.T, n int) []int {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// etcdMember is one etcd member, run as a process.
type etcdMember struct {
	*process
	ClientURL string
}

// startEtcd starts an etcd cluster of n members, each a process with its
// data directory, with quota as QuotaBackendBytes (0: etcd's default), and
// waits until every member serves reads.
func startEtcd(t *testing.T, n int, quota int64) []*etcdMember {
	ports := freePorts(t, 2*n)
	initial := ""
	for i := range n {
		if i > 0 {
			initial += ","
		}
		initial += fmt.Sprintf("etcd-%d=http://127.0.0.1:%d", i, ports[2*i+1])
	}
	var members []*etcdMember
	for i := range n {
		cfg := processConfig{Role: "etcd", DataDir: filepath.Join(t.TempDir(), "etcd"), Name: fmt.Sprintf("etcd-%d", i),
			ClientPort: ports[2*i], PeerPort: ports[2*i+1], InitialCluster: initial, QuotaBackendBytes: quota}
		members = append(members, &etcdMember{process: startProcess(t, cfg), ClientURL: "http://127.0.0.1:" + strconv.Itoa(ports[2*i])})
	}
	for _, m := range members {
		m.waitReady()
	}
	return members
}

// waitReady waits until the member answers a linearizable read.
func (m *etcdMember) waitReady() {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: time.Second, Logger: zap.NewNop()})
	require.NoError(m.t, err)
	defer c.Close()
	require.NoError(m.t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true,
		func(ctx context.Context) (bool, error) {
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := c.Get(ctx, "/faults/ready")
			return err == nil, nil
		}), "etcd %s not ready", m.cfg.Name)
}

func clientURLs(members []*etcdMember) []string {
	var urls []string
	for _, m := range members {
		urls = append(urls, m.ClientURL)
	}
	return urls
}

// apiServer is one of our API servers, run as a process.
type apiServer struct {
	*process
	// Config reaches it as a member of system:masters, by a client
	// certificate its --client-ca-file trusts, so it stays valid across
	// restarts.
	Config *rest.Config
}

// startAPIServer starts our API server on etcd and waits for /readyz.
func startAPIServer(t *testing.T, creds *clientCredentials, etcd []string) *apiServer {
	port := freePorts(t, 1)[0]
	cfg := processConfig{Role: "apiserver", Name: "apiserver-" + strconv.Itoa(port), EtcdServers: etcd, Port: port,
		CertDir: t.TempDir(), ClientCAFile: creds.caFile}
	s := &apiServer{process: startProcess(t, cfg), Config: &rest.Config{
		Host: "https://127.0.0.1:" + strconv.Itoa(port),
		// The serving certificate is self-signed, generated in CertDir; TLS is not what is tested.
		TLSClientConfig: rest.TLSClientConfig{Insecure: true, CertData: creds.cert, KeyData: creds.key},
		QPS:             -1, Burst: -1,
	}}
	s.waitReady()
	return s
}

// waitReady waits until /readyz answers 200.
func (s *apiServer) waitReady() {
	client, err := rest.HTTPClientFor(s.Config)
	require.NoError(s.t, err)
	require.NoError(s.t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			resp, err := client.Get(s.Config.Host + "/readyz")
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			return resp.StatusCode == 200, nil
		}), "API server %s not ready", s.Config.Host)
}

// clientCredentials are a CA (in caFile) and a client certificate it signed
// for user "faults" in group system:masters, which the server's delegated
// authorization always allows.
type clientCredentials struct {
	caFile    string
	cert, key []byte
}

func newClientCredentials(t *testing.T) *clientCredentials {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "faults-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "faults", Organization: []string{"system:masters"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600))
	return &clientCredentials{caFile: caFile,
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}
}
