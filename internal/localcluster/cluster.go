// Package localcluster runs a whole Kubernetes control plane on loopback, without a container
// runtime, for `make run` and the e2e tests: generated PKI, an embedded etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok (a simulated node whose pods and volumes turn
// ready), our aggregated API server registered through an APIService, and database-controller.
//
// kube-apiserver binds to loopback with the endpoint reconciler off (it refuses loopback
// addresses) and reaches our server as an aggregated API (Kubernetes' API aggregation layer):
// an APIService whose caBundle verifies our serving certificate, which carries the Service's
// DNS name, behind an ExternalName Service to localhost (EndpointSlices may not point at
// loopback), with front-proxy client certificates from a CA of their own.
//
// State (PKI, etcd data, logs, kubeconfigs) lives in one directory; starting again on the same
// directory keeps every object. Every child runs in its own process group, is started again
// with a backoff if it exits while the cluster runs, and is stopped by Stop, or killed by the
// kernel if this process dies first.
//
// Identities: the admin kubeconfig is a client certificate with O=system:masters; the
// controller manager and scheduler use their bootstrap-RBAC users. Our server and our
// controller authenticate with client certificates whose CNs are the users of the
// ServiceAccounts a real install runs them as (database-system/database-apiserver and
// database-system/database-controller), so artifacts/rbac applies unchanged.
package localcluster

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"

	"example.com/database-apiserver/internal/embedetcd"
)

const (
	// kubernetesServiceIP is the first address of serviceClusterIPRange: the `kubernetes`
	// Service, a SAN of kube-apiserver's serving cert.
	kubernetesServiceIP   = "10.0.0.1"
	serviceClusterIPRange = "10.0.0.0/24"
	podCIDR               = "10.244.0.0/16"
	// kubeEtcdPrefix keeps kube-apiserver's keys apart from our server's (under /registry) in
	// the shared etcd, and from a CRD of the same group used as a benchmark baseline.
	kubeEtcdPrefix = "/kubernetes"

	// APIServiceName is the APIService registering our group version.
	APIServiceName = "v1.example.com"
	// FakeNodeName is the simulated node kwok manages.
	FakeNodeName = "kwok-node-0"
)

//go:embed node.yaml
var nodeYAML []byte

//go:embed kwok-pod-ready-again.yaml
var podReadyAgainYAML []byte

// Config says where the binaries and manifests are and how to run. Zero ports are picked free
// on 127.0.0.1, so concurrent runs do not collide.
type Config struct {
	// Dir holds the state: pki/, etcd/, logs/, kubeconfig. Created if missing; reused if present.
	Dir string
	// KubeBinDir holds kube-apiserver, kube-controller-manager and kube-scheduler
	// (hack/build-tools.sh: bin/k8s-<version>).
	KubeBinDir string
	// KwokDir holds kwok and its stages/ (hack/build-tools.sh: bin/kwok-<version>).
	KwokDir string
	// ArtifactsDir is the repository's artifacts/: deploy/base/namespace.yaml, rbac/, policy/
	// and deploy/base/apiservice.yaml are applied as a real install applies them.
	ArtifactsDir string
	// APIServerBinary is our aggregated API server. Empty runs the control plane without it
	// (and without the APIService).
	APIServerBinary string
	// APIServerArgs are appended to the flags the cluster sets for our server.
	APIServerArgs []string
	// KubeAPIServerArgs are appended to the flags the cluster sets for kube-apiserver (later
	// flags win, e.g. --profiling=true for a benchmark's profiles).
	KubeAPIServerArgs []string
	// ControllerManagerArgs and SchedulerArgs are appended to the flags the cluster sets for
	// kube-controller-manager and kube-scheduler (e.g. a benchmark's client QPS).
	ControllerManagerArgs []string
	SchedulerArgs         []string
	// ControllerBinary is database-controller; empty runs without it. It needs APIServerBinary.
	// It runs once our server is registered, with --kubeconfig for its own identity
	// (ControllerUser, RBAC from artifacts/rbac; the same kubeconfig delegates the secure
	// port's authentication and authorization) and its secure port on a free port of
	// 127.0.0.1 with a serving certificate of the serving CA, plus ControllerArgs.
	ControllerBinary string
	ControllerArgs   []string
	// RealNode runs a real node (kubelet, containerd, CNI, kube-proxy) next to the simulated
	// one when this machine can (root, the runtime installed, the binaries and images built);
	// nil or unable, the simulated node runs alone and Start logs why.
	RealNode *RealNodeConfig
	// RealNodeBuild is the command (argv) that builds what the real node still lacks, its
	// binaries and images, on a machine that can run it (root, the runtime installed). Set,
	// Start does not wait for it: it runs in the background, in a process group of its own
	// with its log in <Dir>/logs/real-node-build.log, and the real node joins the running
	// cluster once it succeeds; Stop stops it. Empty, a real node not built is no real node.
	RealNodeBuild []string

	// KubeAPIServerPort and APIServerPort are the secure ports; 0 picks a free one.
	KubeAPIServerPort int
	APIServerPort     int

	// Timeout bounds each wait (a part's readiness, the APIService, the node); default 2m.
	Timeout time.Duration
	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any)
}

// DefaultConfig returns a Config for the repository at root: binaries under root/bin at the
// versions pinned by hack/tools/go.mod and hack/tools/kwok/go.mod, state in dir.
func DefaultConfig(root, dir string) (Config, error) {
	kubeVersion, err := pinnedVersion(filepath.Join(root, "hack", "tools", "go.mod"), "k8s.io/kubernetes")
	if err != nil {
		return Config{}, err
	}
	kwokVersion, err := pinnedVersion(filepath.Join(root, "hack", "tools", "kwok", "go.mod"), "sigs.k8s.io/kwok")
	if err != nil {
		return Config{}, err
	}
	kubeBinDir := filepath.Join(root, "bin", "k8s-"+kubeVersion)
	realNode, err := defaultRealNode(root, kubeBinDir)
	if err != nil {
		return Config{}, err
	}
	return Config{
		Dir:              dir,
		KubeBinDir:       kubeBinDir,
		RealNode:         realNode,
		KwokDir:          filepath.Join(root, "bin", "kwok-"+kwokVersion),
		ArtifactsDir:     filepath.Join(root, "artifacts"),
		APIServerBinary:  filepath.Join(root, "bin", "database-apiserver"),
		ControllerBinary: filepath.Join(root, "bin", "database-controller"),
		Timeout:          2 * time.Minute,
	}, nil
}

// pinnedVersion reads the version of module from a go.mod's require lines.
func pinnedVersion(goMod, module string) (string, error) {
	f, err := os.Open(goMod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(s.Text()), "require "))
		if len(fields) >= 2 && fields[0] == module && strings.HasPrefix(fields[1], "v") {
			return fields[1], nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no requirement on %s", goMod, module)
}

// Cluster is a running control plane. Its exported fields are set once Start returns.
type Cluster struct {
	cfg  Config
	pki  *clusterPKI
	etcd *embedetcd.Server

	// KubeconfigPath is the admin kubeconfig (O=system:masters), <Dir>/kubeconfig.
	KubeconfigPath string
	// AdminConfig is the same identity as a rest.Config.
	AdminConfig *rest.Config
	// KubeAPIServerURL is https://127.0.0.1:<port>.
	KubeAPIServerURL string
	// APIServerURL is our server's own address (bypassing the aggregator), empty without it.
	APIServerURL string
	// EtcdURL is the embedded etcd's client URL.
	EtcdURL string
	// ControllerURL is https://127.0.0.1:<port> serving database-controller's /healthz and
	// /readyz to anyone, /metrics to users allowed get on that path (ControllerClient);
	// empty without it.
	ControllerURL string

	apiServerPort int

	// node is the running real node (or, while nodePending, the one being built and started
	// in the background by later); nil without one, and then noRealNode says why. mu guards
	// the four once Start has returned.
	node        *realNode
	noRealNode  string
	nodePending bool
	later       *laterJoin

	// podRouteClaim is this cluster's claim on the unreachable route for podCIDR, which Stop
	// drops (blockPodCIDR); nil without one.
	podRouteClaim *os.File

	mu         sync.Mutex
	components []*component // in start order
	backoff    *flowcontrol.Backoff
	stopping   bool
	stopped    chan struct{} // closed by Stop
}

// Start brings up every part and waits until it is ready: kube-apiserver's /readyz, the
// components' /healthz, the fake node Ready, our server's /readyz and the APIService
// Available. On error everything already started is stopped, and the error carries the tail
// of the failing part's log.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	for _, bin := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if err := requireFile(filepath.Join(cfg.KubeBinDir, bin), "run hack/build-tools.sh"); err != nil {
			return nil, err
		}
	}
	if err := requireFile(filepath.Join(cfg.KwokDir, "kwok"), "run hack/build-tools.sh"); err != nil {
		return nil, err
	}
	for _, bin := range []string{cfg.APIServerBinary, cfg.ControllerBinary} {
		if bin == "" {
			continue
		}
		if err := requireFile(bin, "run make build"); err != nil {
			return nil, err
		}
	}
	if cfg.ControllerBinary != "" && cfg.APIServerBinary == "" {
		return nil, errors.New("localcluster: the controller (ControllerBinary) needs our API server (APIServerBinary)")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	for _, d := range []string{logDir(dir), filepath.Join(dir, "run")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}

	c := &Cluster{cfg: cfg, backoff: newRestartBackoff(), stopped: make(chan struct{})}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	started := time.Now()
	step := func(what string, f func() error) error {
		t := time.Now()
		if err := f(); err != nil {
			return err
		}
		cfg.Logf("%-28s ready in %v", what, time.Since(t).Round(100*time.Millisecond))
		return nil
	}

	if err := step("pki", func() (err error) {
		c.pki, err = loadOrCreatePKI(filepath.Join(dir, "pki"))
		return err
	}); err != nil {
		return nil, err
	}
	notBuilt, err := c.prepareRealNode()
	if err != nil {
		return nil, err
	}
	if err := step("etcd", func() (err error) {
		c.etcd, err = embedetcd.Start(embedetcd.Options{DataDir: filepath.Join(dir, "etcd"), StartTimeout: cfg.Timeout})
		if err == nil {
			c.EtcdURL = c.etcd.ClientURL
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := step("kube-apiserver", func() error { return c.startKubeAPIServer(ctx) }); err != nil {
		return nil, err
	}

	// The components start together; each is awaited below.
	kcm, err := c.startControllerManager()
	if err != nil {
		return nil, err
	}
	sched, err := c.startScheduler()
	if err != nil {
		return nil, err
	}
	c.podRouteClaim = blockPodCIDR(c.cfg.Logf)
	kwok, kwokPort, err := c.startKwok()
	if err != nil {
		return nil, err
	}

	if err := step("base manifests", func() error { return c.applyBase(ctx) }); err != nil {
		return nil, err
	}
	if cfg.APIServerBinary != "" {
		if err := step("database-apiserver", func() error { return c.startAPIServer(ctx) }); err != nil {
			return nil, err
		}
		if err := step("APIService "+APIServiceName, func() error { return c.register(ctx) }); err != nil {
			return nil, err
		}
	}
	probe, err := httpClient(nil, nil)
	if err != nil {
		return nil, err
	}
	for _, p := range []struct {
		proc *process
		url  string
	}{
		{kcm.process, "https://" + hostPort(kcm.port) + "/healthz"},
		{sched.process, "https://" + hostPort(sched.port) + "/healthz"},
		{kwok, "http://" + hostPort(kwokPort) + "/healthz"},
	} {
		if err := step(p.proc.name, func() error { return c.wait(ctx, p.proc, probe, p.url) }); err != nil {
			return nil, err
		}
	}
	if err := step("node "+FakeNodeName, func() error { return c.waitNodeReady(ctx, kwok) }); err != nil {
		return nil, err
	}
	switch {
	case c.node != nil && !c.nodePending:
		if err := step("node "+RealNodeName, func() error { return c.startRealNode(ctx) }); err != nil {
			return nil, err
		}
	case c.node != nil:
		// Until it joins, Pods stay off it: an earlier run's policy goes.
		if err := c.removeRealNodePolicy(ctx); err != nil {
			return nil, err
		}
	default:
		cfg.Logf("no real node: %s; every Pod runs on the simulated node", c.noRealNode)
		if err := c.removeRealNodePolicy(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.ControllerBinary != "" {
		if err := step(ControllerName, func() error { return c.StartController(ctx) }); err != nil {
			return nil, err
		}
	}
	cfg.Logf("control plane ready in %v (state in %s)", time.Since(started).Round(100*time.Millisecond), dir)
	if c.nodePending {
		c.buildRealNodeLater(describeNotBuilt(notBuilt))
	}
	return c, nil
}

func logDir(stateDir string) string { return filepath.Join(stateDir, "logs") }

// LogDir is where each child writes its log (<name>.log). The embedded etcd logs errors to
// this process's stderr.
func (c *Cluster) LogDir() string { return logDir(c.cfg.Dir) }

// Dir is the state directory.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// ServingCAPEM is the CA that signs kube-apiserver's and our server's serving certificates.
func (c *Cluster) ServingCAPEM() []byte { return c.pki.ServingCA.CertPEM() }

// Stop ends the real node's background build (and start), stops every child, newest first
// (SIGTERM to its process group, SIGKILL after 15s), waits until none is supervised (none
// starts again), then stops etcd. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.mu.Lock()
	if !c.stopping {
		c.stopping = true
		close(c.stopped)
	}
	later := c.later
	c.mu.Unlock()
	// A background build or start of the real node ends first, then the real node: it stops
	// its own children, and its Pods through containerd.
	if t := time.Now(); later != nil && later.stop() {
		c.cfg.Logf("%-28s stopped in %v", realNodeBuildName, time.Since(t).Round(100*time.Millisecond))
	}
	c.stopRealNode()
	c.mu.Lock()
	var procs []*process
	var supervisors []chan struct{}
	for _, comp := range c.components {
		if !comp.held && !comp.proc.hasExited() {
			procs = append(procs, comp.proc)
		}
		supervisors = append(supervisors, comp.supervised)
	}
	c.components = nil
	c.mu.Unlock()
	// Clients first, newest first, then the API servers: our server finishes its graceful
	// shutdown only once the watches kube-apiserver proxies for the controllers are gone.
	var order []*process
	for _, servers := range []bool{false, true} {
		for i := len(procs) - 1; i >= 0; i-- {
			if apiServers[procs[i].name] == servers {
				order = append(order, procs[i])
			}
		}
	}
	for _, p := range order {
		t := time.Now()
		p.stop(15 * time.Second)
		c.cfg.Logf("%-28s stopped in %v", p.name, time.Since(t).Round(100*time.Millisecond))
	}
	// Every run has exited and no restart starts once stopping is set: the supervisors return.
	for _, done := range supervisors {
		<-done
	}
	if c.etcd != nil {
		c.etcd.Stop()
		c.etcd = nil
	}
	if c.podRouteClaim != nil {
		unblockPodCIDR(c.podRouteClaim)
		c.podRouteClaim = nil
	}
}

// apiServers are the children serving the API; Stop stops them after the others.
var apiServers = map[string]bool{"kube-apiserver": true, "database-apiserver": true}

// wait waits for url to answer 200 and adds the tail of p's log to a failure; it fails at
// once if p exits. url becomes the readiness probe StartComponent waits for.
func (c *Cluster) wait(ctx context.Context, p *process, client *http.Client, url string) error {
	c.setProbe(p, client, url)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if err := waitHealthy(ctx, p, client, url); err != nil {
		return c.failure(p, err)
	}
	return nil
}

func (c *Cluster) failure(p *process, err error) error {
	return fmt.Errorf("%s: %w\nlast lines of %s:\n%s", p.name, err, p.logPath, p.tail(40))
}

// kubeconfigFor writes <Dir>/kubeconfigs/<name>.kubeconfig for a component's identity.
func (c *Cluster) kubeconfigFor(name string, kp *keyPair) (string, error) {
	path := filepath.Join(c.cfg.Dir, "kubeconfigs", name+".kubeconfig")
	return path, writeKubeconfig(path, c.KubeAPIServerURL, c.pki.ServingCA.CertPEM(), kp, name)
}

// UserKubeconfig writes a kubeconfig for a user with a client certificate signed by the
// cluster's client CA (so kube-apiserver authenticates it as user with groups) and returns
// its path. Tests use it for RBAC.
func (c *Cluster) UserKubeconfig(user string, groups ...string) (string, error) {
	kp, err := c.pki.ClientCert(user, user, groups...)
	if err != nil {
		return "", err
	}
	return c.kubeconfigFor("user-"+user, kp)
}

func (c *Cluster) startKubeAPIServer(ctx context.Context) error {
	port := c.cfg.KubeAPIServerPort
	if port == 0 {
		var err error
		if port, err = freePort(); err != nil {
			return err
		}
	}
	c.KubeAPIServerURL = "https://" + hostPort(port)
	p := c.pki
	args := []string{
		"--etcd-servers=" + c.EtcdURL,
		"--etcd-prefix=" + kubeEtcdPrefix,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + filepath.Join(c.cfg.Dir, "run", "kube-apiserver"),
		"--tls-cert-file=" + p.KubeAPIServer.CertFile,
		"--tls-private-key-file=" + p.KubeAPIServer.KeyFile,
		"--client-ca-file=" + p.ClientCA.CertFile,
		"--service-account-key-file=" + p.ServiceAccountPubKey,
		"--service-account-signing-key-file=" + p.ServiceAccountKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		// Loopback addresses are refused by the endpoint reconciler.
		"--endpoint-reconciler-type=none",
		"--authorization-mode=Node,RBAC",
		// No Service may take an external IP: kube-proxy sends traffic for such an address,
		// a Database's ClusterIP or Pod IP included, to the Service's Pods, so a tenant who
		// may create Services in any namespace would receive another's connections and
		// passwords (CVE-2020-8554, https://github.com/kubernetes/kubernetes/issues/97076).
		"--enable-admission-plugins=DenyServiceExternalIPs",
		"--allow-privileged=true",
		"--requestheader-client-ca-file=" + p.FrontProxyCA.CertFile,
		"--requestheader-allowed-names=" + FrontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-uid-headers=X-Remote-Uid",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.FrontProxy.CertFile,
		"--proxy-client-key-file=" + p.FrontProxy.KeyFile,
		"--profiling=false",
		// On SIGTERM, drain the requests in flight, then give the long-running ones (the
		// watches it proxies to our server, which no watch-termination grace period ends) 2s
		// instead of --request-timeout (60s) before closing their connections.
		"--shutdown-send-retry-after=true",
		"--v=1",
	}
	args = append(args, c.cfg.KubeAPIServerArgs...)
	proc, err := c.start("kube-apiserver", filepath.Join(c.cfg.KubeBinDir, "kube-apiserver"), args)
	if err != nil {
		return err
	}
	client, err := httpClient(p.ServingCA.CertPEM(), p.Admin)
	if err != nil {
		return err
	}
	if err := c.wait(ctx, proc, client, c.KubeAPIServerURL+"/readyz"); err != nil {
		return err
	}

	c.KubeconfigPath = filepath.Join(c.cfg.Dir, "kubeconfig")
	if err := writeKubeconfig(c.KubeconfigPath, c.KubeAPIServerURL, p.ServingCA.CertPEM(), p.Admin, "admin"); err != nil {
		return err
	}
	if c.AdminConfig, err = clientcmd.BuildConfigFromFlags("", c.KubeconfigPath); err != nil {
		return err
	}
	c.AdminConfig.WarningHandler = warningLogger(c.cfg.Logf)
	return nil
}

// warningLogger reports API warnings (e.g. a Database version past end of life) through Logf.
type warningLogger func(format string, args ...any)

func (w warningLogger) HandleWarningHeader(code int, _ string, text string) {
	if code == 299 && text != "" {
		w("warning: %s", text)
	}
}

// componentPort is a child with the port its health endpoint listens on.
type componentPort struct {
	*process
	port int
}

func (c *Cluster) startControllerManager() (componentPort, error) {
	return c.startComponent("kube-controller-manager", c.pki.ControllerMgr, append([]string{
		// nodeipam needs a cluster CIDR and real nodes; kwok assigns pod IPs itself.
		"--controllers=*,-nodeipam",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + c.pki.ServiceAccountKey,
		"--root-ca-file=" + c.pki.ServingCA.CertFile,
		"--cluster-signing-cert-file=" + c.pki.ClientCA.CertFile,
		"--cluster-signing-key-file=" + c.pki.ClientCA.KeyFile,
	}, c.cfg.ControllerManagerArgs...)...)
}

func (c *Cluster) startScheduler() (componentPort, error) {
	return c.startComponent("kube-scheduler", c.pki.Scheduler, c.cfg.SchedulerArgs...)
}

// startComponent starts the Kubernetes component name (a binary in KubeBinDir) as the
// identity kp: a kubeconfig for kp serves as its client, authentication and authorization
// kubeconfig; it serves /healthz on a free secure port of 127.0.0.1 (the returned port), with
// its self-signed serving certificate in <Dir>/run/<name>, without leader election or
// profiling. The extra flags follow these.
func (c *Cluster) startComponent(name string, kp *keyPair, extra ...string) (componentPort, error) {
	port, err := freePort()
	if err != nil {
		return componentPort{}, err
	}
	kubeconfig, err := c.kubeconfigFor(name, kp)
	if err != nil {
		return componentPort{}, err
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + filepath.Join(c.cfg.Dir, "run", name),
		"--leader-elect=false",
		"--profiling=false",
		"--v=1",
	}, extra...)
	p, err := c.start(name, filepath.Join(c.cfg.KubeBinDir, name), args)
	return componentPort{p, port}, err
}

// startKwok writes kwok's configuration (the Stage objects shipped next to the binary) and
// runs it for the nodes annotated kwok.x-k8s.io/node=fake.
func (c *Cluster) startKwok() (*process, int, error) {
	stages, _, err := c.kwokObjects()
	if err != nil {
		return nil, 0, err
	}
	localizeVolumes(stages, filepath.Join(c.cfg.Dir, "volumes"))
	var b strings.Builder
	for _, s := range stages {
		data, err := s.MarshalJSON() // JSON is YAML; one document each
		if err != nil {
			return nil, 0, err
		}
		b.WriteString("---\n")
		b.Write(data)
		b.WriteString("\n")
	}
	config := filepath.Join(c.cfg.Dir, "run", "kwok.yaml")
	if err := os.WriteFile(config, []byte(b.String()), 0o600); err != nil {
		return nil, 0, err
	}
	port, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	args := []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--config=" + config,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=" + podCIDR,
		"--node-ip=127.0.0.1",
		// The node's heartbeat is its Lease (the heartbeat-with-lease stage updates status
		// only every ~10 minutes); without it the node lifecycle controller marks it NotReady.
		"--node-lease-duration-seconds=40",
		"--server-address=" + hostPort(port),
	}
	p, err := c.start("kwok", filepath.Join(c.cfg.KwokDir, "kwok"), args)
	return p, port, err
}

// kwokObjects reads <KwokDir>/stages: Stage objects configure kwok, the rest (the kwok-volume
// StorageClass, its RBAC) goes to the cluster. Our pod-ready-again Stage joins kwok's.
func (c *Cluster) kwokObjects() (stages, rest []*unstructured.Unstructured, err error) {
	dir := filepath.Join(c.cfg.KwokDir, "stages")
	objs, err := readObjects(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("kwok stages (run hack/build-tools.sh): %w", err)
	}
	stages, rest = splitByKind(objs, "Stage")
	if len(stages) == 0 {
		return nil, nil, fmt.Errorf("no kwok Stage in %s", dir)
	}
	ours, err := decodeObjects("kwok-pod-ready-again.yaml", podReadyAgainYAML)
	if err != nil {
		return nil, nil, err
	}
	return append(stages, ours...), rest, nil
}

// applyBase applies the simulated node, kwok's StorageClass, our namespace, RBAC and the
// admission policies that bound the controller (artifacts/policy).
func (c *Cluster) applyBase(ctx context.Context) error {
	a, err := newApplier(c.AdminConfig)
	if err != nil {
		return err
	}
	_, kwokRest, err := c.kwokObjects()
	if err != nil {
		return err
	}
	node, err := decodeObjects("node.yaml", nodeYAML)
	if err != nil {
		return err
	}
	ours, err := readObjects(
		filepath.Join(c.cfg.ArtifactsDir, "deploy", "base", "namespace.yaml"),
		filepath.Join(c.cfg.ArtifactsDir, "rbac"),
		filepath.Join(c.cfg.ArtifactsDir, "policy"))
	if err != nil {
		return err
	}
	objs := append(append(node, kwokRest...), ours...)
	return a.apply(ctx, objs...)
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	port := c.cfg.APIServerPort
	if port == 0 {
		var err error
		if port, err = freePort(); err != nil {
			return err
		}
	}
	c.apiServerPort = port
	c.APIServerURL = "https://" + hostPort(port)
	kubeconfig, err := c.kubeconfigFor("database-apiserver", c.pki.APIServerAuthn)
	if err != nil {
		return err
	}
	args := append([]string{
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file=" + c.pki.APIServer.CertFile,
		"--tls-private-key-file=" + c.pki.APIServer.KeyFile,
		"--etcd-servers=" + c.EtcdURL,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		// The real node's CoreDNS domain, which databases/connection's hosts end with.
		"--cluster-domain=" + clusterDomain,
	}, c.cfg.APIServerArgs...)
	if c.cfg.RealNode != nil {
		// Our server runs on the host, outside the Pods' network: the real node's CoreDNS
		// resolves for it the cluster names of backup stores that are the cluster's Services.
		args = append(args, "--dns-server="+c.DNSServer())
	}
	proc, err := c.start("database-apiserver", c.cfg.APIServerBinary, args)
	if err != nil {
		return err
	}
	client, err := httpClient(c.pki.ServingCA.CertPEM(), nil)
	if err != nil {
		return err
	}
	return c.wait(ctx, proc, client, c.APIServerURL+"/readyz")
}

// register points kube-apiserver's aggregator at our server: an ExternalName Service to
// localhost with our port, and artifacts/deploy/base/apiservice.yaml with caBundle and that port.
func (c *Cluster) register(ctx context.Context) error {
	a, err := newApplier(c.AdminConfig)
	if err != nil {
		return err
	}
	port := c.apiServerPort
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": APIServerServiceName, "namespace": APIServerNamespace},
		"spec": map[string]any{
			"type":         "ExternalName",
			"externalName": "localhost",
			"ports":        []any{map[string]any{"name": "https", "port": int64(port), "protocol": "TCP"}},
		},
	}}
	apiServices, err := readObjects(filepath.Join(c.cfg.ArtifactsDir, "deploy", "base", "apiservice.yaml"))
	if err != nil {
		return err
	}
	for _, as := range apiServices {
		if err := unstructured.SetNestedField(as.Object, int64(port), "spec", "service", "port"); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(as.Object,
			base64.StdEncoding.EncodeToString(c.pki.ServingCA.CertPEM()), "spec", "caBundle"); err != nil {
			return err
		}
	}
	if err := a.apply(ctx, append([]*unstructured.Unstructured{svc}, apiServices...)...); err != nil {
		return err
	}
	if err := c.waitAPIServiceAvailable(ctx); err != nil {
		return err
	}
	return c.waitOpenAPI(ctx)
}

// waitOpenAPI waits until kube-apiserver's aggregated OpenAPI v3 lists our group version: the
// aggregator fetches it some time after the APIService turns Available, and kubectl explain
// (and kubectl's client-side validation) need it.
func (c *Cluster) waitOpenAPI(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.AdminConfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	for {
		paths, err := cs.Discovery().OpenAPIV3().Paths()
		if _, ok := paths["apis/example.com/v1"]; ok && err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver's /openapi/v3 does not list apis/example.com/v1 (last error: %v)", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

func (c *Cluster) waitAPIServiceAvailable(ctx context.Context) error {
	a, err := newApplier(c.AdminConfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	last := "not observed yet"
	for {
		obj, err := a.dynamic.Resource(apiServiceGVR).Get(ctx, APIServiceName, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Available" {
					if m["status"] == "True" {
						return nil
					}
					last = fmt.Sprintf("Available=%v %v: %v", m["status"], m["reason"], m["message"])
				}
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("APIService %s not available: %s\nlast lines of %s:\n%s", APIServiceName, last,
				filepath.Join(c.LogDir(), "database-apiserver.log"),
				tailFile(filepath.Join(c.LogDir(), "database-apiserver.log"), 40))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (c *Cluster) waitNodeReady(ctx context.Context, kwok *process) error {
	cs, err := kubernetes.NewForConfig(c.AdminConfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	for {
		node, err := cs.CoreV1().Nodes().Get(ctx, FakeNodeName, metav1.GetOptions{})
		if err == nil {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		if ok, err := kwok.exited(); ok {
			return c.failure(kwok, err)
		}
		select {
		case <-ctx.Done():
			return c.failure(kwok, fmt.Errorf("node %s not Ready: %w", FakeNodeName, ctx.Err()))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Apply server-side applies the objects of the given YAML files or directories as admin.
func (c *Cluster) Apply(ctx context.Context, paths ...string) error {
	objs, err := readObjects(paths...)
	if err != nil {
		return err
	}
	return c.applyObjects(ctx, objs...)
}

// applyObjects server-side applies objs as admin.
func (c *Cluster) applyObjects(ctx context.Context, objs ...*unstructured.Unstructured) error {
	a, err := newApplier(c.AdminConfig)
	if err != nil {
		return err
	}
	return a.apply(ctx, objs...)
}
