package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"example.com/database-apiserver/internal/localcluster"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// Process names of the servers, as localcluster names its children.
const (
	procKube = "kube-apiserver"
	procOurs = "database-apiserver"
	procCtl  = localcluster.ControllerName
	// procBench is this process: the benchmark's clients and the embedded etcd both servers use.
	procBench = "bench (clients + etcd)"
)

// target is one way of reaching a Database API.
type target struct {
	Name string
	// Desc says what it is, for the report.
	Desc string
	// Procs are the server processes a request of this target goes through.
	Procs  []string
	client *dbClient
	// ours is true for example.com (served by our server), false for the CRD.
	ours bool
}

type bench struct {
	o            options
	sc           scale
	cluster      *localcluster.Cluster
	clusterStart time.Duration
	stateDir     string
	removeState  bool

	kube    kubernetes.Interface
	targets []*target // ours-json, ours-proto, ours-direct, crd
	crd     *target
	direct  *target
	// cpu measures the two API servers.
	cpu cpuMeter
	// adminDirect is the admin identity at our server's own port (for /metrics, /debug/pprof).
	adminDirect *rest.Config
	// controller reads the controller's /metrics and /debug/pprof over HTTPS as a member of
	// system:masters (authorized without a SubjectAccessReview).
	controller *http.Client
}

func newBench(ctx context.Context, o options, root string, sc scale) (_ *bench, err error) {
	b := &bench{o: o, sc: sc}
	if o.crdPath != "" {
		if _, err := os.Stat(o.crdPath); err != nil {
			return nil, fmt.Errorf("the CRD to compare against: %w", err)
		}
	}
	b.stateDir = o.stateDir
	if b.stateDir == "" {
		if b.stateDir, err = os.MkdirTemp("", "database-bench-"); err != nil {
			return nil, err
		}
		b.removeState = !o.keepState
	}
	// On any error below, what was started is stopped and a temporary state directory goes
	// (localcluster.Start's error carries the tail of the failing component's log).
	defer func() {
		if err != nil {
			b.stop()
		}
	}()
	cfg, err := localcluster.DefaultConfig(root, b.stateDir)
	if err != nil {
		return nil, err
	}
	// Without leader election, a controller started again reconciles at once instead of
	// waiting for the Lease of the one stopped before the API benchmark to expire.
	cfg.ControllerArgs = append([]string{"--leader-elect=false"}, strings.Fields(o.controllerArgs)...)
	cfg.APIServerArgs = strings.Fields(o.apiserverArgs)
	cfg.KubeAPIServerArgs = strings.Fields(o.kubeArgs)
	cfg.ControllerManagerArgs = strings.Fields(o.kcmArgs)
	cfg.SchedulerArgs = strings.Fields(o.schedulerArgs)
	// kube-apiserver's /debug/pprof (off in the local cluster) also serves the garbage
	// collections the memory rows ask both servers for (collectGarbage).
	cfg.KubeAPIServerArgs = append(cfg.KubeAPIServerArgs, "--profiling=true")
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return nil, err
		}
		cfg.ControllerArgs = append(cfg.ControllerArgs, "--profiling")
	}
	cfg.Timeout = 3 * time.Minute
	cfg.Logf = func(format string, args ...any) { logf("localcluster: "+format, args...) }

	t := time.Now()
	b.cluster, err = localcluster.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	b.clusterStart = time.Since(t)
	// The API benchmark measures the API alone: the controller would reconcile every Database.
	if err := b.cluster.Kill(procCtl); err != nil {
		return nil, err
	}
	if b.kube, err = kubernetes.NewForConfig(b.cluster.AdminConfig); err != nil {
		return nil, err
	}
	b.cpu = cpuMeter{procKube: b.cluster.PID(procKube), procOurs: b.cluster.PID(procOurs), procBench: os.Getpid()}
	for name, pid := range b.cpu {
		if pid == 0 {
			return nil, fmt.Errorf("no pid for %s", name)
		}
	}

	if err := b.installCRD(ctx); err != nil {
		return nil, err
	}
	b.adminDirect = rest.CopyConfig(b.cluster.AdminConfig)
	b.adminDirect.Host = b.cluster.APIServerURL
	if b.controller, err = b.cluster.ControllerClient("bench-admin", "system:masters"); err != nil {
		return nil, err
	}
	b.controller.Timeout = 0 // a CPU profile takes its seconds; requests end with their context

	mk := func(name, desc string, cfg *rest.Config, gv schema.GroupVersion, ct string, procs ...string) error {
		c, err := newDBClient(cfg, gv, ct)
		if err != nil {
			return err
		}
		tg := &target{Name: name, Desc: desc, Procs: procs, client: c, ours: gv == examplev1.SchemeGroupVersion}
		b.targets = append(b.targets, tg)
		return nil
	}
	admin := b.cluster.AdminConfig
	for _, e := range []error{
		mk("ours-json", "example.com through kube-apiserver (aggregator), JSON", admin, examplev1.SchemeGroupVersion, contentJSON, procKube, procOurs),
		mk("ours-proto", "example.com through kube-apiserver (aggregator), protobuf", admin, examplev1.SchemeGroupVersion, contentProtobuf, procKube, procOurs),
		mk("ours-direct", "example.com on our server's own port, protobuf", b.adminDirect, examplev1.SchemeGroupVersion, contentProtobuf, procOurs),
		mk("crd", "crd.example.com (a CRD of the same type) through kube-apiserver, JSON", admin, crdGroupVersion, contentJSON, procKube),
	} {
		if e != nil {
			return nil, e
		}
	}
	b.direct, b.crd = b.targets[2], b.targets[3]
	return b, nil
}

func (b *bench) stop() {
	if b.cluster != nil {
		b.cluster.Stop()
		b.cluster = nil
	}
	if b.removeState {
		os.RemoveAll(b.stateDir)
	} else {
		logf("state and logs kept in %s", b.stateDir)
	}
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdYAML is the CustomResourceDefinition compared against unless -crd names another.
//
//go:embed crd.yaml
var crdYAML []byte

// installCRD creates the CRD of -crd (crd.yaml by default) with its group set to
// crd.example.com (example.com is ours) and without short names (db is ours too), and waits
// until it serves.
func (b *bench) installCRD(ctx context.Context) error {
	data, source := crdYAML, "crd.yaml"
	if b.o.crdPath != "" {
		var err error
		if data, err = os.ReadFile(b.o.crdPath); err != nil {
			return err
		}
		source = b.o.crdPath
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	plural, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "plural")
	if plural != "databases" {
		return fmt.Errorf("%s: expected the plural databases, got %q", source, plural)
	}
	obj.SetName("databases." + crdGroupVersion.Group)
	if err := unstructured.SetNestedField(obj.Object, crdGroupVersion.Group, "spec", "group"); err != nil {
		return err
	}
	unstructured.RemoveNestedField(obj.Object, "spec", "names", "shortNames")

	dyn, err := dynamic.NewForConfig(b.cluster.AdminConfig)
	if err != nil {
		return err
	}
	if _, err := dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the CRD: %w", err)
	}
	probe, err := newDBClient(b.cluster.AdminConfig, crdGroupVersion, contentJSON)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := probe.List(ctx, "default", metav1.ListOptions{Limit: 1})
		if err == nil {
			logf("CRD databases.%s serving", crdGroupVersion.Group)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the CRD does not serve: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (b *bench) ensureNamespace(ctx context.Context, name string) error {
	_, err := b.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// metricsText fetches /metrics of a server with cfg's identity (our server or kube-apiserver).
func metricsText(ctx context.Context, cfg *rest.Config) (string, error) {
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return "", err
	}
	return httpGet(ctx, &http.Client{Transport: rt, Timeout: 30 * time.Second}, cfg.Host+"/metrics")
}

func httpGet(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), nil
}

// profileCPU records a CPU profile of seconds from a server's /debug/pprof/profile into path,
// in the background, with cfg's identity (or, nil, with client); the returned function waits
// for it.
func profileCPU(ctx context.Context, cfg *rest.Config, client *http.Client, url, path string, seconds int) func() error {
	done := make(chan error, 1)
	go func() {
		done <- saveProfile(ctx, cfg, client, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", url, seconds), path)
	}()
	return func() error { return <-done }
}

// profileHeap runs a garbage collection in a server (/debug/pprof/heap?gc=1, with cfg's
// identity) and writes its heap profile (the live objects after that collection, and what was
// allocated since the server started) into path; with path empty, it only collects.
func profileHeap(ctx context.Context, cfg *rest.Config, path string) error {
	return saveProfile(ctx, cfg, nil, cfg.Host+"/debug/pprof/heap?gc=1", path)
}

// compactEtcd compacts the etcd both servers share to its current revision the way their own
// compactors do (etcd3.Compact: a compare-and-swap of the compaction revision's key, then the
// compaction), so that both learn of it at once, as they watch that key, and their watch
// caches drop the snapshots older than it at their compactors' next poll (every 15 s in
// k8s.io/apiserver). It returns the revision compacted to, or an error when the swap lost to a
// server's own compactor five times.
func compactEtcd(ctx context.Context, url string) (int64, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 10 * time.Second, Context: ctx})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	var version, rev int64
	for range 5 {
		// A swap that succeeds with rev 0 only records the key's first version (etcd3.Compact
		// compacts nothing on bootstrap); one that fails returns the key's version to swap from.
		asked := rev
		var compacted int64
		if version, rev, compacted, err = etcd3.Compact(ctx, cli, version, rev); err != nil {
			return 0, err
		}
		if asked != 0 && compacted == asked {
			return compacted, nil
		}
	}
	return 0, errors.New("compacting etcd: the compaction revision's compare-and-swap lost to the servers' compactors five times")
}

// saveProfile GETs a pprof endpoint with cfg's identity (or, nil, with client) and writes the
// body into path (with path empty, drops it).
func saveProfile(ctx context.Context, cfg *rest.Config, client *http.Client, url, path string) error {
	if cfg != nil {
		rt, err := rest.TransportFor(cfg)
		if err != nil {
			return err
		}
		client = &http.Client{Transport: rt}
	}
	body, err := httpGet(ctx, client, url)
	if err != nil || path == "" {
		return err
	}
	return os.WriteFile(path, []byte(body), 0o644)
}

// gitCommit is the checked-out commit, "-dirty" when the work tree has changes (read-only git).
func gitCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	commit := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		commit += "-dirty"
	}
	return commit
}

var errIncomplete = errors.New("incomplete")
