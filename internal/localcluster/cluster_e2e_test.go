//go:build e2e

package localcluster

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// repoRoot is two directories up from this file.
func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// controlPlaneConfig is the configuration of this package's clusters: kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler and kwok's simulated node, in a temporary directory,
// without our server and controller, and without the real node, which the machine has only
// one of and test/e2e (run at the same time by go test) needs.
func controlPlaneConfig(t *testing.T) Config {
	cfg, err := DefaultConfig(repoRoot(t), t.TempDir())
	require.NoError(t, err)
	cfg.APIServerBinary = ""
	cfg.ControllerBinary = "" // it needs our API server
	cfg.RealNode = nil
	cfg.Logf = t.Logf
	return cfg
}

// TestControlPlaneWithoutAPIServerRestartsOnSameState starts everything but our server,
// checks the simulated node turns Ready, and that a restart on the same state directory
// keeps objects, PKI and the admin kubeconfig's CA.
func TestControlPlaneWithoutAPIServerRestartsOnSameState(t *testing.T) {
	cfg := controlPlaneConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	c, err := Start(ctx, cfg)
	require.NoError(t, err)
	defer c.Stop()
	cs, err := kubernetes.NewForConfig(c.AdminConfig)
	require.NoError(t, err)
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "survives-restart"},
		Data:       map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	sc, err := cs.StorageV1().StorageClasses().Get(ctx, "kwok-volume", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "true", sc.Annotations["storageclass.kubernetes.io/is-default-class"])
	caBefore, err := os.ReadFile(filepath.Join(cfg.Dir, "pki", "serving-ca.crt"))
	require.NoError(t, err)

	requireStatefulSetReady(ctx, t, cs)
	requirePodsUnreachable(ctx, t, cs)
	require.Eventually(t, func() bool { // the node's heartbeat, kept by kwok
		_, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, FakeNodeName, metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 250*time.Millisecond)

	c.Stop()
	c, err = Start(ctx, cfg)
	require.NoError(t, err)
	defer c.Stop()
	cs, err = kubernetes.NewForConfig(c.AdminConfig)
	require.NoError(t, err)
	cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "survives-restart", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "v", cm.Data["k"])
	caAfter, err := os.ReadFile(filepath.Join(cfg.Dir, "pki", "serving-ca.crt"))
	require.NoError(t, err)
	require.Equal(t, caBefore, caAfter)
}

// requireStatefulSetReady proves pods and volumes work without a container runtime: the
// scheduler binds to the kwok node, kwok marks pods Ready and provisions the PVCs.
func requireStatefulSetReady(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	replicas := int32(2)
	labels := map[string]string{"app": "e2e"}
	_, err := cs.AppsV1().StatefulSets("default").Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "postgres:16",
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	start := time.Now()
	require.Eventually(t, func() bool {
		sts, err := cs.AppsV1().StatefulSets("default").Get(ctx, "e2e", metav1.GetOptions{})
		return err == nil && sts.Status.ReadyReplicas == replicas
	}, 90*time.Second, 500*time.Millisecond)
	pvcs, err := cs.CoreV1().PersistentVolumeClaims("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, pvcs.Items, 2)
	for _, pvc := range pvcs.Items {
		require.Equal(t, corev1.ClaimBound, pvc.Status.Phase, pvc.Name)
	}
	t.Logf("StatefulSet 2/2 Ready with bound PVCs in %v", time.Since(start).Round(100*time.Millisecond))
}

// TestNodeAndPodsReadyAgainAfterAnOutageLongerThanTheNodeLease stops kube-apiserver for longer
// than the simulated node's Lease (40s). Once it is back, the node lifecycle controller finds
// the Lease older than its grace period (50s) and marks the node and its Pods NotReady, as it
// would for a node that stopped sending heartbeats; kwok then renews the Lease, and the node
// and its Pods must turn Ready again, as a kubelet's would, with no manual step.
//
// kwok is stopped with kube-apiserver and started once the controller has given its verdict:
// left running, it may renew the Lease before the controller looks at it again, and then
// nothing is marked NotReady at all.
func TestNodeAndPodsReadyAgainAfterAnOutageLongerThanTheNodeLease(t *testing.T) {
	cfg := controlPlaneConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := Start(ctx, cfg)
	require.NoError(t, err)
	defer c.Stop()
	cs, err := kubernetes.NewForConfig(c.AdminConfig)
	require.NoError(t, err)
	requireStatefulSetReady(ctx, t, cs)

	require.NoError(t, c.StopComponent("kwok"))
	require.NoError(t, c.StopComponent("kube-apiserver"))
	time.Sleep(45 * time.Second)
	require.NoError(t, c.StartComponent(ctx, "kube-apiserver"))

	require.Eventually(t, func() bool { // the node lifecycle controller's verdict on the Pods
		events, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Pod,reason=NodeNotReady"})
		return err == nil && len(events.Items) > 0
	}, 2*time.Minute, time.Second, "the Pods were never marked NotReady")
	require.NoError(t, c.StartComponent(ctx, "kwok"))
	start := time.Now()
	require.Eventually(t, func() bool {
		node, err := cs.CoreV1().Nodes().Get(ctx, FakeNodeName, metav1.GetOptions{})
		if err != nil || !nodeReady(node) {
			return false
		}
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=e2e"})
		if err != nil || len(pods.Items) != 2 {
			return false
		}
		for _, pod := range pods.Items {
			if !podReady(&pod) {
				return false
			}
		}
		sts, err := cs.AppsV1().StatefulSets("default").Get(ctx, "e2e", metav1.GetOptions{})
		return err == nil && sts.Status.ReadyReplicas == 2
	}, 2*time.Minute, time.Second, "the node or its Pods stay NotReady")
	t.Logf("node and Pods Ready %v after kwok started again", time.Since(start).Round(100*time.Millisecond))
}

// requirePodsUnreachable checks, as root, that a connection to a simulated Pod's address
// fails at once with "no route to host" (blockPodCIDR's route) rather than leaving the machine.
func requirePodsUnreachable(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	if os.Geteuid() != 0 {
		t.Log("not root: the simulated Pods' addresses are left as the machine routes them")
		return
	}
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=e2e"})
	require.NoError(t, err)
	require.NotEmpty(t, pods.Items)
	ip := pods.Items[0].Status.PodIP
	require.NotEmpty(t, ip)
	_, err = net.DialTimeout("tcp", net.JoinHostPort(ip, "3306"), 10*time.Second)
	require.ErrorIs(t, err, syscall.EHOSTUNREACH, "a connection to the simulated Pod %s", ip)
}

func nodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podReady(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestRealNodeJoinsARunningCluster starts a cluster whose real node is not built yet (its
// binaries and images missing from a directory of its own): Start returns with the simulated
// node alone while the build waits; a Pod of an example Database created meanwhile runs on the
// simulated node. Once the build (links to this repository's built node) is let through, the
// real node joins, and MoveToRealNode moves that Pod to it. It needs what the real node needs
// (root, the runtime, `make node`) and the machine's one real node, so `make test-e2e` runs
// this package after test/e2e.
func TestRealNodeJoinsARunningCluster(t *testing.T) {
	cfg := controlPlaneConfig(t)
	built, err := DefaultConfig(repoRoot(t), cfg.Dir)
	require.NoError(t, err)
	require.Empty(t, realNodeUnavailable(built.RealNode), "this machine must be able to run the real node")
	bin := t.TempDir()
	cfg.RealNode = &RealNodeConfig{
		Kubelet: filepath.Join(bin, "kubelet"), KubeProxy: filepath.Join(bin, "kube-proxy"),
		CNIBinDir: filepath.Join(bin, "cni"), Crane: filepath.Join(bin, "crane"),
		CoreDNS: filepath.Join(bin, "coredns"), ImagesDir: filepath.Join(bin, "images"),
	}
	gate := filepath.Join(bin, "build-may-run")
	r := built.RealNode
	cfg.RealNodeBuild = []string{"bash", "-c", `set -e
while [ ! -e "$0" ]; do sleep 0.2; done
cd "$1"
ln -s "$2" kubelet; ln -s "$3" kube-proxy; ln -s "$4" cni; ln -s "$5" crane; ln -s "$6" coredns; ln -s "$7" images
echo linked`, gate, bin, r.Kubelet, r.KubeProxy, r.CNIBinDir, r.Crane, r.CoreDNS, r.ImagesDir}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	c, err := Start(ctx, cfg)
	require.NoError(t, err)
	defer c.Stop()
	require.True(t, c.RealNodePending())
	ok, why := c.RealNode()
	require.False(t, ok)
	require.Contains(t, why, "not joined yet")
	cs, err := kubernetes.NewForConfig(c.AdminConfig)
	require.NoError(t, err)

	// A Database's Pod as the controller labels it, created before the real node joined.
	examples := filepath.Join(t.TempDir(), "shop.yaml")
	require.NoError(t, os.WriteFile(examples, []byte(
		"apiVersion: example.com/v1\nkind: Database\nmetadata:\n  name: shop\n  namespace: default\n"), 0o600))
	labels := map[string]string{"app.kubernetes.io/instance": "shop", "app.kubernetes.io/managed-by": "database-controller"}
	one := int32(1)
	_, err = cs.AppsV1().StatefulSets("default").Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "shop"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "postgres", Image: "postgres:15"}}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var before *corev1.Pod
	require.Eventually(t, func() bool {
		before, err = cs.CoreV1().Pods("default").Get(ctx, "shop-0", metav1.GetOptions{})
		return err == nil && before.Spec.NodeName != ""
	}, time.Minute, 250*time.Millisecond)
	require.Equal(t, FakeNodeName, before.Spec.NodeName)
	moved, err := c.MoveToRealNode(ctx, examples)
	require.NoError(t, err)
	require.Empty(t, moved, "nothing moves before the real node runs")

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	ok, why = c.WaitRealNode(ctx)
	require.True(t, ok, why)
	require.False(t, c.RealNodePending())
	node, err := cs.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, nodeReady(node))
	log, err := os.ReadFile(c.RealNodeBuildLog())
	require.NoError(t, err)
	require.Contains(t, string(log), "linked\n")

	moved, err = c.MoveToRealNode(ctx, examples)
	require.NoError(t, err)
	require.Equal(t, []string{"default/shop-0"}, moved)
	after, err := cs.CoreV1().Pods("default").Get(ctx, "shop-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEqual(t, before.UID, after.UID)
	require.Equal(t, RealNodeName, after.Spec.NodeName)
}

// TestFailedRealNodeBuildKeepsTheClusterOnTheSimulatedNode: a build that fails leaves the
// cluster running without the real node, saying why, with the build's log.
func TestFailedRealNodeBuildKeepsTheClusterOnTheSimulatedNode(t *testing.T) {
	cfg := controlPlaneConfig(t)
	built, err := DefaultConfig(repoRoot(t), cfg.Dir)
	require.NoError(t, err)
	require.Empty(t, realNodeMachineUnavailable(built.RealNode), "this machine must be able to run the real node")
	cfg.RealNode = &RealNodeConfig{ImagesDir: t.TempDir()} // nothing built
	cfg.RealNodeBuild = []string{"bash", "-c", "echo 'compiling kubelet'; echo 'out of disk' >&2; exit 2"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := Start(ctx, cfg)
	require.NoError(t, err)
	defer c.Stop()
	ok, why := c.WaitRealNode(ctx)
	require.False(t, ok)
	require.Contains(t, why, "the build failed: ")
	require.Contains(t, why, "exit status 2 (log: "+c.RealNodeBuildLog()+")")
	log, err := os.ReadFile(c.RealNodeBuildLog())
	require.NoError(t, err)
	require.Contains(t, string(log), "out of disk\n")
	// The lock is released: another cluster may run the real node.
	f, err := os.OpenFile(realNodeLock, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_UN))

	cs, err := kubernetes.NewForConfig(c.AdminConfig)
	require.NoError(t, err)
	requireStatefulSetReady(ctx, t, cs)
}
