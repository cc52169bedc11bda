package localcluster

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The real node: a kubelet on containerd, with CNI bridge networking and kube-proxy, next to
// kwok's simulated node. It runs the Pods whose images the local registry holds (the engine
// images hack/build-node-images.sh builds); every other Pod stays on the simulated node.
const (
	// RealNodeName is the node the kubelet registers.
	RealNodeName = "real-node-0"
	// RealNodeLabel and RealNodeTaint select the real node: it is tainted NoSchedule, and
	// RealNodePolicyName gives the Pods it can run a matching toleration and node selector.
	RealNodeLabel      = "localcluster.example.com/real-node"
	RealNodePolicyName = "localcluster-real-node"

	// realNodeBridge is the Linux bridge the CNI bridge plugin attaches Pods to; its address,
	// the gateway of realNodePodCIDR, is the node's IP (the kubelet refuses a loopback one).
	realNodeBridge  = "localcluster0"
	realNodePodCIDR = "10.245.0.0/24"
	realNodeIP      = "10.245.0.1"
	realNodeGateway = realNodeIP + "/24"

	// realNodeLock is held while a real node runs: kube-proxy's iptables chains and the
	// bridge are machine-wide, so one machine runs one real node at a time.
	realNodeLock = "/run/lock/database-apiserver-localcluster-node.lock"
)

// RealNodeConfig says where the real node's programs and images are.
type RealNodeConfig struct {
	// Kubelet and KubeProxy are the pinned binaries (hack/build-tools.sh: bin/k8s-<version>).
	Kubelet, KubeProxy string
	// CNIBinDir holds the bridge, host-local, loopback and portmap plugins
	// (bin/cni-<version>).
	CNIBinDir string
	// Crane serves the image registry on loopback (bin/crane-<version>/crane).
	Crane string
	// CoreDNS is the cluster DNS (bin/coredns-<version>/coredns).
	CoreDNS string
	// ImagesDir holds the image tarballs and their .tags files (hack/build-node-images.sh:
	// bin/images).
	ImagesDir string
}

// defaultRealNode is the real node of a repository at root with its binaries in bin/.
func defaultRealNode(root, kubeBinDir string) (*RealNodeConfig, error) {
	cniVersion, err := pinnedVersion(filepath.Join(root, "hack", "tools", "cni", "go.mod"), "github.com/containernetworking/plugins")
	if err != nil {
		return nil, err
	}
	craneVersion, err := pinnedVersion(filepath.Join(root, "hack", "tools", "crane", "go.mod"), "github.com/google/go-containerregistry")
	if err != nil {
		return nil, err
	}
	corednsVersion, err := pinnedVersion(filepath.Join(root, "hack", "tools", "coredns", "go.mod"), "github.com/coredns/coredns")
	if err != nil {
		return nil, err
	}
	return &RealNodeConfig{
		CoreDNS:   filepath.Join(root, "bin", "coredns-"+corednsVersion, "coredns"),
		Kubelet:   filepath.Join(kubeBinDir, "kubelet"),
		KubeProxy: filepath.Join(kubeBinDir, "kube-proxy"),
		CNIBinDir: filepath.Join(root, "bin", "cni-"+cniVersion),
		Crane:     filepath.Join(root, "bin", "crane-"+craneVersion, "crane"),
		ImagesDir: filepath.Join(root, "bin", "images"),
	}, nil
}

// realNode is the running real node's state, for Stop.
type realNode struct {
	cfg RealNodeConfig
	dir string // <Dir>/node

	lock         *os.File
	ipForward    string // net.ipv4.ip_forward before we set it, restored by stop
	bridgeMade   bool
	iptables     map[string]map[string]bool // chains before the node started, by family
	newDirs      []string                   // machineDirs that did not exist before the node started
	registryPort int
	socket       string // containerd's CRI socket

	// images are the names Pod specs give the registry's images (podImageNames).
	images []string
	// engineImages are the engine images pushed, checked against the catalog.
	engineImages []NodeImage

	registry, containerd, kubelet, kubeProxy, dns *process
	// volumeDirs prepares the hostPath volumes' directories for non-root Pods.
	volumeDirs *volumeDirs
}

// podImageNames returns the names a Pod spec may give the image pushed as repoTag (a
// repository:tag of the local registry, which containerd mirrors for docker.io): the short
// and the full Docker Hub names, e.g. "postgres:15" and "docker.io/library/postgres:15" for
// "library/postgres:15".
func podImageNames(repoTag string) []string {
	if short, ok := strings.CutPrefix(repoTag, "library/"); ok {
		return []string{short, "docker.io/" + repoTag}
	}
	return []string{repoTag, "docker.io/" + repoTag}
}

// RealNode reports whether the real node runs, and if not, why.
func (c *Cluster) RealNode() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.nodePending:
		return false, "not joined yet: its binaries and images are being built (log: " + c.RealNodeBuildLog() + ")"
	case c.node != nil:
		return true, ""
	}
	return false, c.noRealNode
}

// realNodeUnavailable says why this machine cannot run the real node now, or "" if it can.
func realNodeUnavailable(cfg *RealNodeConfig) string {
	if why := realNodeMachineUnavailable(cfg); why != "" {
		return why
	}
	if missing := realNodeNotBuilt(cfg); len(missing) > 0 {
		return missing[0].why
	}
	if _, err := readNodeImages(cfg.ImagesDir); err != nil {
		return err.Error()
	}
	return ""
}

// realNodeMachineUnavailable says why this machine cannot run the real node whatever is
// built, or "" if it can once its binaries and images are.
func realNodeMachineUnavailable(cfg *RealNodeConfig) string {
	if cfg == nil {
		return "not configured"
	}
	if os.Geteuid() != 0 {
		return "not root (the kubelet and containerd need root)"
	}
	for _, tool := range []string{"containerd", "containerd-shim-runc-v2", "runc", "iptables", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not found in PATH (hack/install-node-deps.sh installs it; as root, PATH needs /usr/sbin and /sbin)"
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		return "no cgroup file system at /sys/fs/cgroup"
	}
	// Traffic from a Pod to a Service whose endpoint is another Pod of the bridge must cross
	// iptables (kube-proxy's DNAT and its reverse).
	if b, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables"); err != nil || strings.TrimSpace(string(b)) != "1" {
		return "net.bridge.bridge-nf-call-iptables is not 1 (load br_netfilter and set it), so Pods could not reach Services"
	}
	return ""
}

// notBuilt is a binary or image the real node needs that is not there: what (a short name
// for log lines) and why (the error, with the command that builds it).
type notBuilt struct{ what, why string }

// realNodeNotBuilt lists the real node's binaries and images that are not built yet, in the
// order hack/build-tools.sh and hack/build-node-images.sh build them.
func realNodeNotBuilt(cfg *RealNodeConfig) []notBuilt {
	var missing []notBuilt
	for _, bin := range []struct{ what, path string }{
		{"kubelet", cfg.Kubelet},
		{"kube-proxy", cfg.KubeProxy},
		{"the CNI plugins", filepath.Join(cfg.CNIBinDir, "bridge")},
		{"the CNI plugins", filepath.Join(cfg.CNIBinDir, "host-local")},
		{"the CNI plugins", filepath.Join(cfg.CNIBinDir, "loopback")},
		{"the CNI plugins", filepath.Join(cfg.CNIBinDir, "portmap")},
		{"crane", cfg.Crane},
		{"CoreDNS", cfg.CoreDNS},
	} {
		if err := requireFile(bin.path, "run hack/build-tools.sh"); err != nil {
			missing = append(missing, notBuilt{bin.what, err.Error()})
		}
	}
	for _, img := range append([]string{"pause"}, nodeImageNames...) {
		if _, err := os.Stat(filepath.Join(cfg.ImagesDir, img+".tags")); err != nil {
			missing = append(missing, notBuilt{"the " + img + " image",
				fmt.Sprintf("no %s image in %s (run hack/build-node-images.sh)", img, cfg.ImagesDir)})
		}
	}
	return missing
}

// describeNotBuilt joins the distinct names of missing: "kubelet, kube-proxy, the CNI
// plugins and the postgres image".
func describeNotBuilt(missing []notBuilt) string {
	var names []string
	for _, m := range missing {
		if !slices.Contains(names, m.what) {
			names = append(names, m.what)
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// prepareRealNode decides whether this cluster runs the real node; when it does, it takes
// the machine's real-node lock and adds the flags kube-apiserver needs to reach the kubelet.
// Call it before kube-apiserver starts.
//
// A real node whose binaries or images are not built yet is prepared too when
// Config.RealNodeBuild can build them: it is left pending, for Start to build and start in the
// background (buildRealNodeLater), and the returned list says what it lacks.
func (c *Cluster) prepareRealNode() ([]notBuilt, error) {
	if why := realNodeMachineUnavailable(c.cfg.RealNode); why != "" {
		c.noRealNode = why
		return nil, nil
	}
	missing := realNodeNotBuilt(c.cfg.RealNode)
	if len(missing) > 0 && len(c.cfg.RealNodeBuild) == 0 {
		c.noRealNode = missing[0].why
		return nil, nil
	}
	if len(missing) == 0 {
		if _, err := readNodeImages(c.cfg.RealNode.ImagesDir); err != nil {
			c.noRealNode = err.Error()
			return nil, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(realNodeLock), 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(realNodeLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(realNodeLock)
		lock.Close()
		c.noRealNode = fmt.Sprintf("another local cluster on this machine runs the real node (%s, held by %s); stop it, then start this one again to get the real node",
			realNodeLock, strings.TrimSpace(string(holder)))
		return nil, nil
	}
	// Who holds it, for the message above.
	if err := lock.Truncate(0); err == nil {
		_, _ = fmt.Fprintf(lock, "pid %d, state in %s\n", os.Getpid(), c.cfg.Dir)
	}
	kp, err := c.pki.ClientCert("kube-apiserver-kubelet-client", "kube-apiserver-kubelet-client")
	if err != nil {
		lock.Close()
		return nil, err
	}
	c.node = &realNode{cfg: *c.cfg.RealNode, dir: filepath.Join(c.cfg.Dir, "node"), lock: lock}
	c.nodePending = len(missing) > 0
	// The kubelet's serving address is its InternalIP; its client-certificate authentication
	// accepts the cluster's client CA.
	c.cfg.KubeAPIServerArgs = append([]string{
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--kubelet-client-certificate=" + kp.CertFile,
		"--kubelet-client-key=" + kp.KeyFile,
	}, c.cfg.KubeAPIServerArgs...)
	return missing, nil
}

// startRealNode brings the real node up: host network (the bridge, IP forwarding), the
// registry with the images pushed, containerd, the volume directories' preparation
// (prepareVolumeDir), the kubelet (until its node is Ready),
// kube-proxy (until it is healthy), the node selection policy, and CoreDNS (until ready).
func (c *Cluster) startRealNode(ctx context.Context) error {
	n := c.node
	for _, d := range []string{"containerd", "kubelet", "cni/net.d", "cni/ipam", "registry", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o700); err != nil {
			return err
		}
	}
	if err := n.setupNetwork(); err != nil {
		return fmt.Errorf("real node network: %w", err)
	}
	if err := c.startRegistry(ctx); err != nil {
		return err
	}
	if err := c.startContainerd(ctx); err != nil {
		return err
	}
	// Pulled now, so the first Pod does not wait for it (and a slow pull shows here, not as
	// a Pod stuck in ContainerCreating). The runtime keeps them in its own root: a later start
	// pulls nothing.
	var pull []string
	for _, img := range n.images {
		if strings.HasPrefix(img, "docker.io/") {
			pull = append(pull, img)
		}
	}
	pull = append(pull, hostPort(n.registryPort)+"/localcluster/pause:1")
	if err := pullImages(ctx, n.socket, pull...); err != nil {
		return c.failure(n.containerd, err)
	}
	// Pods a killed run left behind are attached to the bridge it had: the kubelet starts
	// them again on this one.
	if err := removeSandboxes(ctx, n.socket, 10*time.Second); err != nil {
		return c.failure(n.containerd, fmt.Errorf("removing the Pods of an earlier run: %w", err))
	}
	dirs, err := c.startVolumeDirs(ctx)
	if err != nil {
		return err
	}
	n.volumeDirs = dirs
	if err := c.startKubelet(ctx); err != nil {
		return err
	}
	if err := c.startKubeProxy(ctx); err != nil {
		return err
	}
	if err := c.applyRealNodeObjects(ctx); err != nil {
		return err
	}
	if err := c.waitRealNodePolicy(ctx); err != nil {
		return err
	}
	return c.startDNS(ctx)
}

// waitRealNodePolicy waits until kube-apiserver applies the node selection policy (it loads
// admission policies asynchronously): a dry-run create of a Pod running one of the node's
// images, asking for 250m CPU, comes back with the node selector the policy adds and asking
// for 25m.
func (c *Cluster) waitRealNodePolicy(ctx context.Context) error {
	n := c.node
	if len(n.images) == 0 {
		return nil
	}
	cs, err := kubernetes.NewForConfig(c.AdminConfig)
	if err != nil {
		return err
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "localcluster-policy-probe", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: n.images[0],
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
		}}},
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	last := "not tried yet"
	for {
		got, err := cs.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err != nil:
			last = err.Error()
		case got.Spec.NodeSelector[RealNodeLabel] != "true":
			last = "a Pod running " + n.images[0] + " is not sent to the real node yet"
		case got.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 25:
			last = "a Pod running " + n.images[0] + " asking for 250m CPU asks for " +
				got.Spec.Containers[0].Resources.Requests.Cpu().String() + ", not a tenth"
		default:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the node selection policy %s is not in effect: %s", RealNodePolicyName, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// applyRealNodeObjects applies realnode.yaml: the node selection policy for the registry's
// images, and CoreDNS's read access.
func (c *Cluster) applyRealNodeObjects(ctx context.Context) error {
	n := c.node
	images, err := json.Marshal(n.images)
	if err != nil {
		return err
	}
	// A JSON list of strings is a CEL list literal.
	policy := strings.ReplaceAll(string(realNodeYAML), "LOCAL_IMAGES", string(images))
	objs, err := decodeObjects("realnode.yaml", []byte(policy))
	if err != nil {
		return err
	}
	return c.applyObjects(ctx, objs...)
}

//go:embed realnode.yaml
var realNodeYAML []byte

// removeRealNodePolicy deletes the node selection policy a previous run with the real node
// applied, so a cluster without it schedules every Pod on the simulated node.
func (c *Cluster) removeRealNodePolicy(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.AdminConfig)
	if err != nil {
		return err
	}
	ar := cs.AdmissionregistrationV1()
	for _, err := range []error{
		ar.MutatingAdmissionPolicyBindings().Delete(ctx, RealNodePolicyName, metav1.DeleteOptions{}),
		ar.MutatingAdmissionPolicies().Delete(ctx, RealNodePolicyName, metav1.DeleteOptions{}),
	} {
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// setupNetwork turns on IP forwarding (Pods reach Services through the host) and makes the
// bridge with the node's IP.
func (n *realNode) setupNetwork() error {
	old, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		return err
	}
	n.ipForward = strings.TrimSpace(string(old))
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return err
	}
	n.iptables = iptablesSnapshot()
	for _, d := range machineDirs {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			n.newDirs = append(n.newDirs, d)
		}
	}
	// A bridge left by a killed run is made again, so its address is ours.
	_ = run("ip", "link", "delete", realNodeBridge)
	n.bridgeMade = true
	for _, args := range [][]string{
		{"link", "add", realNodeBridge, "type", "bridge"},
		{"addr", "add", realNodeGateway, "dev", realNodeBridge},
		{"link", "set", realNodeBridge, "up"},
	} {
		if err := run("ip", args...); err != nil {
			return err
		}
	}
	return nil
}

// run runs a command and returns its combined output in the error.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// startRegistry serves the image registry on a free loopback port, its blobs kept under
// <Dir>/node/registry (manifests live in memory, so the images are pushed at every start;
// their layers are found on disk, so a second push copies nothing).
func (c *Cluster) startRegistry(ctx context.Context) error {
	n := c.node
	port, err := freePort()
	if err != nil {
		return err
	}
	n.registryPort = port
	p, err := c.start("registry", n.cfg.Crane, []string{"registry", "serve",
		"--address=" + hostPort(port), "--disk=" + filepath.Join(n.dir, "registry")})
	if err != nil {
		return err
	}
	n.registry = p
	client := &http.Client{Timeout: 5 * time.Second}
	if err := c.wait(ctx, p, client, "http://"+hostPort(port)+"/v2/"); err != nil {
		return err
	}
	if n.engineImages, err = readNodeImages(n.cfg.ImagesDir); err != nil {
		return err
	}
	tags, err := filepath.Glob(filepath.Join(n.cfg.ImagesDir, "*.tags"))
	if err != nil {
		return err
	}
	for _, tagFile := range tags {
		b, err := os.ReadFile(tagFile)
		if err != nil {
			return err
		}
		tarball := strings.TrimSuffix(tagFile, ".tags") + ".tar"
		for _, tag := range strings.Fields(string(b)) {
			n.images = append(n.images, podImageNames(tag)...)
			cmd := exec.CommandContext(ctx, n.cfg.Crane, "push", tarball, hostPort(port)+"/"+tag)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("pushing %s as %s: %w: %s", tarball, tag, err, out)
			}
		}
	}
	return nil
}

// containerdConfig is containerd's configuration (version 2): its own root, state and socket
// under <Dir>/node/containerd, CRI with the local registry's pause image as the sandbox and as
// a mirror of docker.io (so the catalog's postgres:15 resolves to it), CNI from CNIBinDir, and
// restrict_oom_score_adj (machines without CAP_SYS_RESOURCE cannot lower a process's OOM
// score; without it every sandbox fails to start).
func (n *realNode) containerdConfig() string {
	dir := filepath.Join(n.dir, "containerd")
	registry := hostPort(n.registryPort)
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) } // TOML basic strings are JSON strings
	return fmt.Sprintf(`version = 2
root = %s
state = %s
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.internal.v1.opt", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %s
[ttrpc]
  address = %s
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %s
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = %s
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %s
    conf_dir = %s
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
    endpoint = [%s]
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors.%s]
    endpoint = [%s]
`, q(filepath.Join(dir, "root")), q(filepath.Join(dir, "state")),
		q(n.socket), q(n.socket+".ttrpc"),
		q(registry+"/localcluster/pause:1"), q(filepath.Join(dir, "runc")),
		q(n.cfg.CNIBinDir), q(filepath.Join(n.dir, "cni", "net.d")),
		q("http://"+registry), q(registry), q("http://"+registry))
}

// cniConfig is the Pod network: the bridge with host-local addresses from realNodePodCIDR and
// the node as the default route (hairpin mode, so a Pod reaches itself through its Service),
// and portmap for hostPorts.
// No masquerading: Pods talk to each other and the host only.
func (n *realNode) cniConfig() ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "localcluster",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": realNodeBridge, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": []any{[]any{map[string]any{"subnet": realNodePodCIDR, "gateway": realNodeIP}}},
					// Through the node: Service addresses are outside the Pod network.
					"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
					"dataDir": filepath.Join(n.dir, "cni", "ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
		},
	}, "", "  ")
}

func (c *Cluster) startContainerd(ctx context.Context) error {
	n := c.node
	n.socket = filepath.Join(n.dir, "containerd", "containerd.sock")
	cni, err := n.cniConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.dir, "cni", "net.d", "10-localcluster.conflist"), cni, 0o600); err != nil {
		return err
	}
	config := filepath.Join(n.dir, "containerd", "config.toml")
	if err := os.WriteFile(config, []byte(n.containerdConfig()), 0o600); err != nil {
		return err
	}
	p, err := c.start("containerd", "containerd", []string{"--config=" + config})
	if err != nil {
		return err
	}
	n.containerd = p
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	for {
		rt, err := dialCRI(ctx, n.socket)
		if err == nil {
			_, err = rt.version(ctx)
			rt.close()
			if err == nil {
				return nil
			}
		}
		if ok, exitErr := p.exited(); ok {
			return c.failure(p, exitErr)
		}
		select {
		case <-ctx.Done():
			return c.failure(p, fmt.Errorf("containerd's CRI at %s not serving: %v", n.socket, err))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// kubeletConfig is the KubeletConfiguration for this machine: cgroupfs without per-QoS
// cgroups or node-allocatable enforcement (these machines mount cgroup v1 and give the kubelet
// no cgroup of its own), swap tolerated, no local-storage isolation, client-certificate
// authentication with the cluster's client CA (kube-apiserver's logs, exec and port-forward),
// no eviction short of an almost full disk, and the node tainted so only the Pods the node
// selection policy sends come here.
func (c *Cluster) kubeletConfig(port, healthzPort int) ([]byte, error) {
	n := c.node
	return json.MarshalIndent(map[string]any{
		"apiVersion":                    "kubelet.config.k8s.io/v1beta1",
		"kind":                          "KubeletConfiguration",
		"address":                       realNodeIP,
		"port":                          port,
		"readOnlyPort":                  0,
		"healthzBindAddress":            "127.0.0.1",
		"healthzPort":                   healthzPort,
		"containerRuntimeEndpoint":      "unix://" + n.socket,
		"cgroupDriver":                  "cgroupfs",
		"failCgroupV1":                  false,
		"cgroupsPerQOS":                 false,
		"enforceNodeAllocatable":        []string{},
		"failSwapOn":                    false,
		"localStorageCapacityIsolation": false,
		"podLogsDir":                    filepath.Join(n.dir, "pod-logs"),
		"podCIDR":                       realNodePodCIDR,
		"clusterDomain":                 clusterDomain,
		"clusterDNS":                    []string{realNodeIP},
		"serializeImagePulls":           false,
		"imageGCHighThresholdPercent":   100,
		"imageGCLowThresholdPercent":    99,
		"evictionHard":                  map[string]string{"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": false},
			"x509":      map[string]any{"clientCAFile": c.pki.ClientCA.CertFile},
		},
		"authorization": map[string]any{"mode": "AlwaysAllow"},
		"registerWithTaints": []corev1.Taint{
			{Key: RealNodeLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		},
	}, "", "  ")
}

func (c *Cluster) startKubelet(ctx context.Context) error {
	n := c.node
	kp, err := c.pki.ClientCert("system-node-"+RealNodeName, "system:node:"+RealNodeName, "system:nodes")
	if err != nil {
		return err
	}
	kubeconfig, err := c.kubeconfigFor("kubelet", kp)
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	healthzPort, err := freePort()
	if err != nil {
		return err
	}
	config, err := c.kubeletConfig(port, healthzPort)
	if err != nil {
		return err
	}
	configPath := filepath.Join(n.dir, "kubelet", "config.json")
	if err := os.WriteFile(configPath, config, 0o600); err != nil {
		return err
	}
	p, err := c.start("kubelet", n.cfg.Kubelet, []string{
		"--config=" + configPath,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(n.dir, "kubelet"),
		"--cert-dir=" + filepath.Join(n.dir, "kubelet", "pki"),
		"--hostname-override=" + RealNodeName,
		"--node-ip=" + realNodeIP,
		"--node-labels=" + RealNodeLabel + "=true",
		"--v=1",
	})
	if err != nil {
		return err
	}
	n.kubelet = p
	return c.waitNode(ctx, p, RealNodeName)
}

// waitNode waits until node is Ready, failing early when p (its agent) exits.
func (c *Cluster) waitNode(ctx context.Context, p *process, node string) error {
	cs, err := kubernetes.NewForConfig(c.AdminConfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	last := "not registered"
	for {
		got, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			for _, cond := range got.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					if cond.Status == corev1.ConditionTrue {
						return nil
					}
					last = fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
				}
			}
		}
		if ok, err := p.exited(); ok {
			return c.failure(p, err)
		}
		select {
		case <-ctx.Done():
			return c.failure(p, fmt.Errorf("node %s not Ready (%s): %w", node, last, ctx.Err()))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// kubeProxyConfig is kube-proxy's configuration: iptables mode for the real node, Pods in
// realNodePodCIDR (traffic from elsewhere to a Service is masqueraded), and no conntrack
// table sizing (it would write the machine's sysctls).
func (c *Cluster) kubeProxyConfig(kubeconfig string, healthzPort, metricsPort int) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"kind":               "KubeProxyConfiguration",
		"mode":               "iptables",
		"hostnameOverride":   RealNodeName,
		"clusterCIDR":        realNodePodCIDR,
		"healthzBindAddress": hostPort(healthzPort),
		"metricsBindAddress": hostPort(metricsPort),
		"clientConnection":   map[string]any{"kubeconfig": kubeconfig},
		"conntrack":          map[string]any{"maxPerCore": 0},
	}, "", "  ")
}

func (c *Cluster) startKubeProxy(ctx context.Context) error {
	n := c.node
	kp, err := c.pki.ClientCert("system-kube-proxy", "system:kube-proxy")
	if err != nil {
		return err
	}
	kubeconfig, err := c.kubeconfigFor("kube-proxy", kp)
	if err != nil {
		return err
	}
	healthzPort, err := freePort()
	if err != nil {
		return err
	}
	metricsPort, err := freePort()
	if err != nil {
		return err
	}
	config, err := c.kubeProxyConfig(kubeconfig, healthzPort, metricsPort)
	if err != nil {
		return err
	}
	configPath := filepath.Join(n.dir, "kube-proxy.json")
	if err := os.WriteFile(configPath, config, 0o600); err != nil {
		return err
	}
	p, err := c.start("kube-proxy", n.cfg.KubeProxy, []string{"--config=" + configPath, "--v=1"})
	if err != nil {
		return err
	}
	n.kubeProxy = p
	client := &http.Client{Timeout: 5 * time.Second}
	return c.wait(ctx, p, client, "http://"+hostPort(healthzPort)+"/healthz")
}

// stopRealNode takes the real node down and removes what it added to the machine: kube-proxy
// and its iptables rules, the kubelet, every Pod sandbox and container (each container is
// given its termination grace, then killed; sandboxes are removed through CRI, which tears down
// their network and mounts), containerd and the registry, whatever is still mounted under
// <Dir>/node, the bridge, and the IP forwarding setting. The data directories stay, so the
// next start finds the volumes, images and Pods' state. Safe to call when it never started.
func (c *Cluster) stopRealNode() {
	n := c.node
	if n == nil {
		return
	}
	logf := c.cfg.Logf
	timed := func(what string, f func()) {
		t := time.Now()
		f()
		logf("%-28s stopped in %v", what, time.Since(t).Round(100*time.Millisecond))
	}
	if n.dns != nil {
		timed("coredns", func() { c.stopChild("coredns", 5*time.Second) })
	}
	if n.kubeProxy != nil {
		timed("kube-proxy", func() {
			c.stopChild("kube-proxy", 15*time.Second)
			if out, err := exec.Command(n.cfg.KubeProxy, "--cleanup").CombinedOutput(); err != nil {
				logf("kube-proxy --cleanup: %v: %s", err, out)
			}
		})
	}
	if n.kubelet != nil {
		timed("kubelet", func() { c.stopChild("kubelet", 15*time.Second) })
	}
	if n.containerd != nil {
		timed("pods on "+RealNodeName, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			if err := removeSandboxes(ctx, n.socket, 10*time.Second); err != nil {
				logf("removing the real node's pods: %v", err)
			}
		})
		timed("containerd", func() { c.stopChild("containerd", 15*time.Second) })
	}
	if n.registry != nil {
		timed("registry", func() { c.stopChild("registry", 5*time.Second) })
	}
	if n.volumeDirs != nil {
		n.volumeDirs.stop()
	}
	removeContainerLogLinks(filepath.Join(n.dir, "pod-logs"))
	if err := unmountUnder(n.dir); err != nil {
		logf("unmounting under %s: %v", n.dir, err)
	}
	if n.iptables != nil {
		if err := removeNewIptablesChains(n.iptables); err != nil {
			logf("removing the real node's iptables chains: %v", err)
		}
	}
	if n.bridgeMade {
		if err := run("ip", "link", "delete", realNodeBridge); err != nil {
			logf("%v", err)
		}
	}
	// Deepest first; a directory something else has put files in stays. The kubelet leaves
	// its device-plugin registration socket behind.
	for _, d := range n.newDirs {
		if d == kubeletDevicePlugins {
			_ = os.Remove(filepath.Join(d, "kubelet.sock"))
		}
		_ = os.Remove(d)
	}
	if n.ipForward != "" && n.ipForward != "1" {
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte(n.ipForward), 0o644); err != nil {
			logf("restoring net.ipv4.ip_forward: %v", err)
		}
	}
	n.lock.Close()
	c.mu.Lock()
	c.node = nil
	c.mu.Unlock()
}

// stopChild stops the current run of the child called name (SIGTERM, SIGKILL after grace)
// for good: it is not restarted, and Stop no longer counts it among its children.
func (c *Cluster) stopChild(name string, grace time.Duration) {
	c.mu.Lock()
	comp := c.componentLocked(name)
	if comp == nil {
		c.mu.Unlock()
		return
	}
	comp.held = true
	c.components = slices.DeleteFunc(c.components, func(x *component) bool { return x == comp })
	c.mu.Unlock()
	comp.proc.stop(grace)
}

// machineDirs are the fixed directories the real node's programs make outside <Dir>, deepest
// first: containerd's Pod network namespaces and shim sockets, the CNI result cache, the
// kubelet's device-plugin socket directory and container log links. Those that did not exist before the node started are
// removed when it stops, if empty.
var machineDirs = []string{
	"/run/netns", "/run/containerd/s", "/run/containerd",
	"/var/lib/cni/results", "/var/lib/cni",
	kubeletDevicePlugins, "/var/lib/kubelet",
	containerLogLinks,
}

// kubeletDevicePlugins is where the kubelet serves device plugins' registration (a fixed
// path, whatever its root directory).
const kubeletDevicePlugins = "/var/lib/kubelet/device-plugins"

// containerLogLinks is where the kubelet links every container's log (a fixed path).
const containerLogLinks = "/var/log/containers"

// removeContainerLogLinks removes the kubelet's links in containerLogLinks that point into
// podLogs, and leaves every other file there alone.
func removeContainerLogLinks(podLogs string) {
	entries, err := os.ReadDir(containerLogLinks)
	if err != nil {
		return
	}
	for _, e := range entries {
		link := filepath.Join(containerLogLinks, e.Name())
		if target, err := os.Readlink(link); err == nil && strings.HasPrefix(target, podLogs+"/") {
			_ = os.Remove(link)
		}
	}
}

// unmountUnder unmounts every mount point under dir, deepest first.
func unmountUnder(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		// The mount point (field 5) escapes spaces and the like as octal: \040.
		point := unescapeMountPath(fields[4])
		if point == dir || strings.HasPrefix(point, dir+"/") {
			points = append(points, point)
		}
	}
	var errs []error
	for i := len(points) - 1; i >= 0; i-- {
		if err := syscall.Unmount(points[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("%s: %w", points[i], err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMountPath decodes mountinfo's octal escapes (\040 for a space, \011, \012, \134).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%3o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
