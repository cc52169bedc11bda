//go:build e2e

package e2e

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	certutil "k8s.io/client-go/util/cert"

	"example.com/database-apiserver/pkg/apiserver"
	controllerapp "example.com/database-apiserver/pkg/controller/app"
	"example.com/database-apiserver/pkg/controller/specs"

	// The tests build the children of every engine of the repository.
	_ "example.com/database-apiserver/pkg/engine/engines"
)

// installNamespace is the namespace artifacts/deploy installs into.
const installNamespace = "database-system"

// kustomize renders the kustomization in dir (relative to the repository root, or absolute)
// with kubectl, as `kubectl apply -k` would, and decodes its objects.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	out := kubectl(t, "kustomize", dir)
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		// Through JSON into Unstructured, so that numbers are int64 as the API machinery has them.
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return objs
		}
		require.NoError(t, err)
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON(raw))
		objs = append(objs, u)
	}
}

// certsOverlay copies artifacts/ to a temporary directory, runs hack/gen-certs into its
// artifacts/deploy/certs as the install instructions do, and returns the overlay's path and
// the generated serving CA bundle. The repository's own certs/ directory is neither read (a
// developer may keep real certificates there) nor written.
func certsOverlay(t *testing.T) (dir string, servingCABundle []byte) {
	t.Helper()
	tmp := t.TempDir()
	src := filepath.Join(root, "artifacts")
	certs := filepath.Join(src, "deploy", "certs")
	require.NoError(t, filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(tmp, "artifacts", rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if filepath.Dir(path) == certs && d.Name() != "kustomization.yaml" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	}))
	dir = filepath.Join(tmp, "artifacts", "deploy", "certs")
	cmd := exec.Command("go", "run", "./hack/gen-certs", "--dir", dir)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	bundle, err := os.ReadFile(filepath.Join(dir, "serving-ca-bundle.crt"))
	require.NoError(t, err)
	return dir, bundle
}

// find returns the rendered object of kind and name, or fails.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	require.FailNow(t, "not rendered", "%s %s", kind, name)
	return nil
}

// movedTo returns deep copies of objs whose objects in installNamespace are in ns instead. The
// Namespace itself, cluster-scoped objects and other namespaces (kube-system) stay as they are.
func movedTo(objs []*unstructured.Unstructured, ns string) []*unstructured.Unstructured {
	return namespacesMoved(objs, map[string]string{installNamespace: ns})
}

// namespacesMoved returns deep copies of objs whose objects in a namespace that to maps are
// in the namespace it maps it to; the others stay where they are.
func namespacesMoved(objs []*unstructured.Unstructured, to map[string]string) []*unstructured.Unstructured {
	var moved []*unstructured.Unstructured
	for _, o := range objs {
		o = o.DeepCopy()
		if ns, ok := to[o.GetNamespace()]; ok {
			o.SetNamespace(ns)
		}
		moved = append(moved, o)
	}
	return moved
}

// namespacedControllers are the overlays of artifacts/deploy/controller-namespaced that run a
// controller for one namespace: the namespace it watches and the directory that installs it.
var namespacedControllers = []struct{ namespace, dir string }{
	{"a", "artifacts/deploy/controller-namespaced/a"},
	{"b", "artifacts/deploy/controller-namespaced/b"},
}

// composed writes a kustomization into a temporary directory, as a user's own around the
// shipped ones: its resources and components are the directories given (relative to the
// repository root, or absolute), by relative paths as kustomize requires. It returns the
// directory.
func composed(t *testing.T, resources, components []string) string {
	t.Helper()
	dir := t.TempDir()
	list := func(key string, dirs []string) string {
		if len(dirs) == 0 {
			return ""
		}
		var b strings.Builder
		b.WriteString(key + ":\n")
		for _, d := range dirs {
			if !filepath.IsAbs(d) {
				d = filepath.Join(root, d)
			}
			rel, err := filepath.Rel(dir, d)
			require.NoError(t, err)
			b.WriteString("- " + rel + "\n")
		}
		return b.String()
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
		list("resources", resources) + list("components", components)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644))
	return dir
}

// namespacedOnlyInstall is the install docs/security.md's "Namespaced mode" describes: artifacts/deploy
// with the component controller-namespaced/only (in a kustomization of its own, as its comment
// requires), which leaves the cluster-wide controller out, and the namespaced controllers of
// namespacedControllers.
func namespacedOnlyInstall(t *testing.T) string {
	t.Helper()
	resources := []string{composed(t, []string{"artifacts/deploy"}, []string{"artifacts/deploy/controller-namespaced/only"})}
	for _, c := range namespacedControllers {
		resources = append(resources, c.dir)
	}
	return composed(t, resources, nil)
}

// clusterWideController is what artifacts/deploy runs the cluster-wide controller with, as
// kind/namespace/name: its workload (artifacts/deploy/base/controller), its ServiceAccount and
// every binding that names it (artifacts/rbac/controller-*.yaml). The component
// controller-namespaced/only removes exactly these; the ClusterRole database-controller stays.
var clusterWideController = []string{
	"Deployment/" + installNamespace + "/database-controller",
	"PodDisruptionBudget/" + installNamespace + "/database-controller",
	"NetworkPolicy/" + installNamespace + "/database-controller",
	"ServiceAccount/" + installNamespace + "/database-controller",
	"ClusterRoleBinding//database-controller",
	"ClusterRoleBinding//database-controller:system:auth-delegator",
	"RoleBinding/kube-system/database-controller:extension-apiserver-authentication-reader",
	"Role/" + installNamespace + "/database-controller:leader-election",
	"RoleBinding/" + installNamespace + "/database-controller:leader-election",
}

// ids returns kind/namespace/name of every object.
func ids(objs []*unstructured.Unstructured) []string {
	var ids []string
	for _, o := range objs {
		ids = append(ids, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	return ids
}

// manifest is objs as one YAML stream (JSON documents).
func manifest(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	var b strings.Builder
	for _, o := range objs {
		data, err := o.MarshalJSON()
		require.NoError(t, err)
		b.WriteString("---\n")
		b.Write(data)
		b.WriteString("\n")
	}
	return b.String()
}

// freshNamespace creates ns with the labels of the rendered Namespace (Pod Security
// restricted), as installing into an empty cluster would, and deletes it after the test. An
// overlay added to an install (a namespaced controller's) renders no Namespace: ns then gets
// artifacts/deploy's.
func freshNamespace(t *testing.T, objs []*unstructured.Unstructured, ns string) {
	t.Helper()
	if !slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Namespace" }) {
		objs = kustomize(t, "artifacts/deploy")
	}
	n := find(t, objs, "Namespace", installNamespace).DeepCopy()
	n.SetName(ns)
	kubectlIn(t, manifest(t, []*unstructured.Unstructured{n}), "apply", "-f", "-")
	t.Cleanup(func() {
		if os.Getenv("E2E_KEEP_STATE") == "" {
			kubectlAs(cluster.KubeconfigPath, "", "delete", "namespace", ns, "--wait=false")
		}
	})
}

// serverDryRun sends every object to kube-apiserver as a server-side apply with
// dryRun=All: admission (Pod Security included) and validation run, nothing is stored.
// Objects in installNamespace go to ns, a fresh namespace: the local cluster already has its
// own database-apiserver Service (an ExternalName) there. The APIService and the RBAC are
// dry-run against the ones the local cluster applied, taking over their fields.
func serverDryRun(t *testing.T, objs []*unstructured.Unstructured, ns string) {
	t.Helper()
	freshNamespace(t, objs, ns)
	out, errOut, err := kubectlAs(cluster.KubeconfigPath, manifest(t, movedTo(objs, ns)),
		"apply", "--server-side", "--dry-run=server", "--force-conflicts", "--field-manager=e2e-deploy", "-f", "-")
	require.NoError(t, err, "stdout: %s\nstderr: %s", out, errOut)
	// A Pod template the namespace's restricted profile would refuse shows as a warning.
	require.NotContains(t, errOut, "Warning", "stderr: %s", errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, len(objs), out)
	for _, l := range lines {
		require.True(t, strings.HasSuffix(l, "(server dry run)"), l)
	}
}

// TestDeployRendersAndEveryObjectPassesServerDryRun renders artifacts/deploy and its
// overlays with kubectl and dry-runs every object on the local control plane.
func TestDeployRendersAndEveryObjectPassesServerDryRun(t *testing.T) {
	t.Run("artifacts/deploy", func(t *testing.T) {
		objs := kustomize(t, "artifacts/deploy")
		for _, want := range [][2]string{
			{"Namespace", installNamespace},
			{"ServiceAccount", "database-apiserver"}, {"ServiceAccount", "database-controller"}, {"ServiceAccount", "database-etcd"},
			{"StatefulSet", "database-etcd"}, {"Service", "database-etcd"},
			{"Deployment", "database-apiserver"}, {"Service", "database-apiserver"},
			{"Deployment", "database-controller"},
			{"APIService", "v1.example.com"},
			{"PodDisruptionBudget", "database-etcd"}, {"PodDisruptionBudget", "database-apiserver"}, {"PodDisruptionBudget", "database-controller"},
			{"ClusterRoleBinding", "database-apiserver:system:auth-delegator"},
			{"RoleBinding", "database-apiserver:extension-apiserver-authentication-reader"},
			{"ClusterRoleBinding", "database-controller:system:auth-delegator"},
			{"RoleBinding", "database-controller:extension-apiserver-authentication-reader"},
			{"ClusterRole", "database-metrics-reader"},
			{"NetworkPolicy", "default-deny-ingress"}, {"NetworkPolicy", "database-apiserver"},
			{"NetworkPolicy", "database-controller"}, {"NetworkPolicy", "database-etcd"},
			// The admission policies that bound the controller (artifacts/policy).
			{"ValidatingAdmissionPolicy", "database-controller-children"},
			{"ValidatingAdmissionPolicyBinding", "database-controller-children"},
			{"ValidatingAdmissionPolicy", "database-controller-workloads"},
			{"ValidatingAdmissionPolicyBinding", "database-controller-workloads"},
			{"ValidatingAdmissionPolicy", "database-controller-jobs"},
			{"ValidatingAdmissionPolicyBinding", "database-controller-jobs"},
			{"ValidatingAdmissionPolicy", "database-controller-pods"},
			{"ValidatingAdmissionPolicyBinding", "database-controller-pods"},
			{"ValidatingAdmissionPolicy", "database-controller-poddisruptionbudgets"},
			{"ValidatingAdmissionPolicyBinding", "database-controller-poddisruptionbudgets"},
			{"ValidatingAdmissionPolicy", "database-controller-services"},
			{"ValidatingAdmissionPolicyBinding", "database-controller-services"},
			{"ValidatingAdmissionPolicy", "database-controller-secrets"},
			{"ValidatingAdmissionPolicyBinding", "database-controller-secrets"},
			{"ValidatingAdmissionPolicy", "database-controller-claims"},
			{"ValidatingAdmissionPolicyBinding", "database-controller-claims"},
			{"ValidatingAdmissionPolicy", "database-controller-networkpolicies"},
			{"ValidatingAdmissionPolicyBinding", "database-controller-networkpolicies"},
			{"ValidatingAdmissionPolicy", "database-controller-deletes"},
			{"ValidatingAdmissionPolicyBinding", "database-controller-deletes"},
			{"ValidatingAdmissionPolicy", "database-controller-releases"},
			{"ValidatingAdmissionPolicyBinding", "database-controller-releases"},
			{"ValidatingAdmissionPolicy", "database-controller-credentials"},
			{"ValidatingAdmissionPolicyBinding", "database-controller-credentials"},
			{"ValidatingAdmissionPolicy", "database-controller-events"},
			{"ValidatingAdmissionPolicyBinding", "database-controller-events"},
			{"ValidatingAdmissionPolicy", "database-controller-databases"},
			{"ValidatingAdmissionPolicyBinding", "database-controller-databases"},
		} {
			find(t, objs, want[0], want[1])
		}
		for _, o := range objs {
			require.NotEqual(t, "Secret", o.GetKind(), "certificates come from an overlay")
		}
		serverDryRun(t, objs, "e2e-deploy-base")
	})

	t.Run("artifacts/deploy/certs after hack/gen-certs", func(t *testing.T) {
		dir, bundle := certsOverlay(t)
		objs := kustomize(t, dir)
		apiService := find(t, objs, "APIService", "v1.example.com")
		caBundle, _, _ := unstructured.NestedString(apiService.Object, "spec", "caBundle")
		decoded, err := base64.StdEncoding.DecodeString(caBundle)
		require.NoError(t, err)
		require.Equal(t, bundle, decoded, "caBundle is the generated serving CA bundle")
		skip, _, _ := unstructured.NestedBool(apiService.Object, "spec", "insecureSkipTLSVerify")
		require.False(t, skip)
		for _, name := range []string{"database-apiserver-serving", "database-etcd-server", "database-etcd-peer", "database-etcd-client"} {
			secret := find(t, objs, "Secret", name)
			require.Equal(t, "kubernetes.io/tls", secret.Object["type"])
			require.Equal(t, installNamespace, secret.GetNamespace())
		}
		serverDryRun(t, objs, "e2e-deploy-certs")
	})

	t.Run("artifacts/deploy/cert-manager", func(t *testing.T) {
		objs := kustomize(t, "artifacts/deploy/cert-manager")
		apiService := find(t, objs, "APIService", "v1.example.com")
		require.Equal(t, installNamespace+"/database-apiserver-serving",
			apiService.GetAnnotations()["cert-manager.io/inject-ca-from"])
		find(t, objs, "Certificate", "database-apiserver-serving")
		// cert-manager's kinds are not served here; everything else is.
		var served []*unstructured.Unstructured
		for _, o := range objs {
			if !strings.HasPrefix(o.GetAPIVersion(), "cert-manager.io/") {
				served = append(served, o)
			}
		}
		serverDryRun(t, served, "e2e-deploy-cert-manager")
	})

	// A namespaced controller's overlay holds its RBAC and its workload, nothing of the rest of
	// the install. Its RoleBinding goes to a fresh namespace in place of the watched one.
	for _, c := range namespacedControllers {
		t.Run(c.dir, func(t *testing.T) {
			objs := kustomize(t, c.dir)
			name := "database-controller-" + c.namespace
			require.ElementsMatch(t, []string{
				"ServiceAccount/" + installNamespace + "/" + name,
				"RoleBinding/" + c.namespace + "/" + name,
				"Role/" + installNamespace + "/" + name,
				"RoleBinding/" + installNamespace + "/" + name,
				"ClusterRoleBinding//database-controller:system:auth-delegator-" + c.namespace,
				"RoleBinding/kube-system/database-controller:extension-apiserver-authentication-reader-" + c.namespace,
				"Deployment/" + installNamespace + "/" + name,
				"PodDisruptionBudget/" + installNamespace + "/" + name,
				"NetworkPolicy/" + installNamespace + "/" + name,
			}, ids(objs))
			for _, o := range objs {
				require.Equal(t, "database-apiserver", o.GetLabels()["app.kubernetes.io/part-of"], o.GetName())
			}
			watched := testNamespace(t, "e2e-deploy-watched-"+c.namespace)
			serverDryRun(t, namespacesMoved(objs, map[string]string{c.namespace: watched}), "e2e-deploy-namespaced-"+c.namespace)
		})
	}

	t.Run("only namespaced controllers", func(t *testing.T) {
		objs := kustomize(t, namespacedOnlyInstall(t))
		// Everything of artifacts/deploy but the cluster-wide controller, and the namespaced ones.
		var want []string
		for _, id := range ids(kustomize(t, "artifacts/deploy")) {
			if !slices.Contains(clusterWideController, id) {
				want = append(want, id)
			}
		}
		require.Len(t, want, len(ids(kustomize(t, "artifacts/deploy")))-len(clusterWideController),
			"every object the component removes is one of artifacts/deploy")
		watched := map[string]string{}
		for _, c := range namespacedControllers {
			want = append(want, ids(kustomize(t, c.dir))...)
			watched[c.namespace] = testNamespace(t, "e2e-deploy-only-watched-"+c.namespace)
		}
		require.ElementsMatch(t, want, ids(objs))
		find(t, objs, "ClusterRole", "database-controller")
		// No binding is left to the cluster-wide controller's ServiceAccount.
		for _, o := range objs {
			if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
				continue
			}
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, sub := range subjects {
				require.NotEqual(t, "database-controller", sub.(map[string]any)["name"], "%s %s", o.GetKind(), o.GetName())
			}
		}
		serverDryRun(t, namespacesMoved(objs, watched), "e2e-deploy-namespaced-only")
	})

	t.Run("only next to a namespaced controller fails to build", func(t *testing.T) {
		// Listed in the kustomization that also holds a namespaced controller, the component
		// would match its objects too (made from the same files): kustomize refuses, rather
		// than leaving the namespaced controller out.
		dir := composed(t, []string{"artifacts/deploy", namespacedControllers[0].dir},
			[]string{"artifacts/deploy/controller-namespaced/only"})
		out, errOut, err := kubectlAs(cluster.KubeconfigPath, "", "kustomize", dir)
		require.Error(t, err, "stdout: %s", out)
		require.Contains(t, errOut, "multiple matches")
	})
}

// TestDeployPodsRunRestrictedInAFreshNamespace installs the namespaced objects of the certs
// overlay, with those of the namespaced controller of a next to the cluster-wide one, for real
// into a namespace with the restricted Pod Security profile enforced: Pod Security admission
// must admit every Pod, the etcd members get their volumes, the workloads turn ready on the
// simulated node (which runs no containers: probes and images are not exercised here), and
// each PodDisruptionBudget covers the Pods of its own workload only.
func TestDeployPodsRunRestrictedInAFreshNamespace(t *testing.T) {
	dir, _ := certsOverlay(t)
	objs := kustomize(t, dir)
	const ns = "e2e-deploy-install"
	freshNamespace(t, objs, ns)
	var namespaced []*unstructured.Unstructured
	for _, o := range movedTo(append(objs, kustomize(t, namespacedControllers[0].dir)...), ns) {
		if o.GetNamespace() == ns {
			namespaced = append(namespaced, o)
		}
	}
	kubectlIn(t, manifest(t, namespaced), "apply", "--server-side", "--field-manager=e2e-deploy", "-f", "-")

	ready := func(kind, name, field string, want int) func() error {
		return func() error {
			out, _, err := kubectlAs(cluster.KubeconfigPath, "", "get", kind, name, "-n", ns,
				"-o", "jsonpath={.status."+field+"}")
			if err != nil {
				return err
			}
			if out != fmt.Sprint(want) {
				events, _, _ := kubectlAs(cluster.KubeconfigPath, "", "get", "events", "-n", ns)
				return fmt.Errorf("%s/%s: %s=%q, want %d; events:\n%s", kind, name, field, out, want, events)
			}
			return nil
		}
	}
	eventually(t, 90*time.Second, ready("statefulset", "database-etcd", "readyReplicas", 3))
	eventually(t, 60*time.Second, ready("deployment", "database-apiserver", "availableReplicas", 2))
	eventually(t, 60*time.Second, ready("deployment", "database-controller", "availableReplicas", 2))
	namespacedController := "database-controller-" + namespacedControllers[0].namespace
	eventually(t, 60*time.Second, ready("deployment", namespacedController, "availableReplicas", 2))
	out := kubectl(t, "get", "pvc", "-n", ns, "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.phase} {end}")
	require.ElementsMatch(t, []string{"data-database-etcd-0=Bound", "data-database-etcd-1=Bound", "data-database-etcd-2=Bound"},
		strings.Fields(out))
	// Every PodDisruptionBudget allows exactly one voluntary disruption, of its own workload's
	// Pods: the cluster-wide controller's budget does not count the namespaced controller's.
	for pdb, pods := range map[string]int{"database-etcd": 3, "database-apiserver": 2, "database-controller": 2, namespacedController: 2} {
		eventually(t, 30*time.Second, ready("pdb", pdb, "disruptionsAllowed", 1))
		eventually(t, 30*time.Second, ready("pdb", pdb, "expectedPods", pods))
	}
}

// TestDeployWorkloadsAreHardened pins what Pod Security's restricted profile does not check:
// read-only root filesystems, resource requests, probes, and the replicas and flags of a
// highly available install (3 etcd members, 2 API servers, 2 controllers with leader election),
// for the namespaced controllers as for the cluster-wide one, whose Deployment they run.
func TestDeployWorkloadsAreHardened(t *testing.T) {
	objs := kustomize(t, "artifacts/deploy")
	type workload struct {
		dir, kind, name string
		replicas        int64
		args            []string
	}
	controllerArgs := []string{"--leader-elect=true", "--secure-port=8081",
		"--authorization-always-allow-paths=/healthz,/readyz,/livez"}
	workloads := []workload{
		{"artifacts/deploy", "StatefulSet", "database-etcd", 3, []string{"--client-cert-auth=true", "--peer-client-cert-auth=true"}},
		{"artifacts/deploy", "Deployment", "database-apiserver", 2, []string{"--audit-log-path=-", "--secure-port=8443"}},
		{"artifacts/deploy", "Deployment", "database-controller", 2, controllerArgs},
	}
	controllers := []*unstructured.Unstructured{find(t, objs, "Deployment", "database-controller")}
	for _, c := range namespacedControllers {
		name := "database-controller-" + c.namespace
		workloads = append(workloads, workload{c.dir, "Deployment", name, 2,
			append([]string{"--namespace=" + c.namespace}, controllerArgs...)})
		controllers = append(controllers, find(t, kustomize(t, c.dir), "Deployment", name))
	}
	for _, w := range workloads {
		t.Run(w.name, func(t *testing.T) {
			o := find(t, kustomize(t, w.dir), w.kind, w.name)
			replicas, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
			require.Equal(t, w.replicas, replicas)
			affinity, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec", "affinity", "podAntiAffinity")
			require.NotEmpty(t, affinity, "pod anti-affinity")
			// The anti-affinity spreads the workload's own Pods: it selects what its selector does.
			selector, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
			terms, _, _ := unstructured.NestedSlice(affinity, "preferredDuringSchedulingIgnoredDuringExecution")
			require.Len(t, terms, 1)
			spread, _, _ := unstructured.NestedStringMap(terms[0].(map[string]any), "podAffinityTerm", "labelSelector", "matchLabels")
			require.Equal(t, selector, spread)
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			require.Len(t, containers, 1)
			c := containers[0].(map[string]any)
			readOnly, _, _ := unstructured.NestedBool(c, "securityContext", "readOnlyRootFilesystem")
			require.True(t, readOnly, "read-only root filesystem")
			escalation, found, _ := unstructured.NestedBool(c, "securityContext", "allowPrivilegeEscalation")
			require.True(t, found)
			require.False(t, escalation)
			drop, _, _ := unstructured.NestedStringSlice(c, "securityContext", "capabilities", "drop")
			require.Equal(t, []string{"ALL"}, drop)
			nonRoot, _, _ := unstructured.NestedBool(o.Object, "spec", "template", "spec", "securityContext", "runAsNonRoot")
			require.True(t, nonRoot)
			seccomp, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "securityContext", "seccompProfile", "type")
			require.Equal(t, "RuntimeDefault", seccomp)
			requests, _, _ := unstructured.NestedStringMap(c, "resources", "requests")
			require.Contains(t, requests, "cpu")
			require.Contains(t, requests, "memory")
			for _, probe := range []string{"livenessProbe", "readinessProbe"} {
				require.Contains(t, c, probe)
			}
			image, _, _ := unstructured.NestedString(c, "image")
			require.Regexp(t, `:[^:/]+$`, image, "a pinned tag")
			args, _, _ := unstructured.NestedStringSlice(c, "args")
			for _, a := range w.args {
				require.Contains(t, args, a)
			}
		})
	}

	apiserver := find(t, objs, "Deployment", "database-apiserver")
	containers, _, _ := unstructured.NestedSlice(apiserver.Object, "spec", "template", "spec", "containers")
	liveness, _, _ := unstructured.NestedString(containers[0].(map[string]any), "livenessProbe", "httpGet", "path")
	require.Equal(t, "/livez?exclude=etcd", liveness)

	// The controllers' probes speak HTTPS to the port that serves /metrics; their Pods carry
	// the labels a Database's NetworkPolicy admits the controller by.
	for _, controller := range controllers {
		podLabels, _, _ := unstructured.NestedStringMap(controller.Object, "spec", "template", "metadata", "labels")
		for k, v := range specs.ControllerPodLabels {
			require.Equal(t, v, podLabels[k], "%s: Pod label %s", controller.GetName(), k)
		}
		containers, _, _ = unstructured.NestedSlice(controller.Object, "spec", "template", "spec", "containers")
		for _, probe := range []string{"livenessProbe", "readinessProbe"} {
			get, _, _ := unstructured.NestedMap(containers[0].(map[string]any), probe, "httpGet")
			require.Equal(t, "HTTPS", get["scheme"], "%s %s", controller.GetName(), probe)
			require.Equal(t, "https", get["port"], "%s %s", controller.GetName(), probe)
		}
	}

	// A namespaced controller's Deployment, budget and policy are the cluster-wide
	// controller's, and differ only in what makes them its own: the name (of the objects, the
	// ServiceAccount and the label app.kubernetes.io/name that every selector uses) and
	// --namespace, first of the arguments.
	for _, c := range namespacedControllers {
		t.Run(c.dir+" runs the cluster-wide controller's workload", func(t *testing.T) {
			got := kustomize(t, c.dir)
			name := "database-controller-" + c.namespace
			set := func(o *unstructured.Unstructured, value any, fields ...string) {
				_, found, err := unstructured.NestedFieldNoCopy(o.Object, fields...)
				require.NoError(t, err)
				require.True(t, found, "%v", fields)
				require.NoError(t, unstructured.SetNestedField(o.Object, value, fields...))
			}
			nameLabel := "app.kubernetes.io/name"

			want := find(t, objs, "Deployment", "database-controller").DeepCopy()
			want.SetName(name)
			set(want, name, "metadata", "labels", nameLabel)
			set(want, name, "spec", "selector", "matchLabels", nameLabel)
			set(want, name, "spec", "template", "metadata", "labels", nameLabel)
			set(want, name, "spec", "template", "spec", "serviceAccountName")
			spec := want.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			term := spec["affinity"].(map[string]any)["podAntiAffinity"].(map[string]any)["preferredDuringSchedulingIgnoredDuringExecution"].([]any)[0]
			set(&unstructured.Unstructured{Object: term.(map[string]any)}, name, "podAffinityTerm", "labelSelector", "matchLabels", nameLabel)
			container := spec["containers"].([]any)[0].(map[string]any)
			container["args"] = append([]any{"--namespace=" + c.namespace}, container["args"].([]any)...)
			require.Equal(t, want.Object, find(t, got, "Deployment", name).Object)

			want = find(t, objs, "PodDisruptionBudget", "database-controller").DeepCopy()
			want.SetName(name)
			set(want, name, "spec", "selector", "matchLabels", nameLabel)
			require.Equal(t, want.Object, find(t, got, "PodDisruptionBudget", name).Object)

			want = find(t, objs, "NetworkPolicy", "database-controller").DeepCopy()
			want.SetName(name)
			set(want, name, "spec", "podSelector", "matchLabels", nameLabel)
			require.Equal(t, want.Object, find(t, got, "NetworkPolicy", name).Object)
		})
	}
}

// TestDeployNetworkPoliciesAdmitOnlyWhatEachPortServes reads the rendered NetworkPolicies of
// the install's namespace: one denies all ingress to every Pod, and the others admit, per
// workload, exactly these (source, port) pairs, each port a named port of the workload's
// container: anyone to the API server's https port (kube-apiserver, whose address cannot be
// selected), the namespace "monitoring" to each controller's https port and etcd's metrics
// port, the API server to etcd's client port, the members to their client and peer ports. The
// same holds for the install with namespaced controllers only.
func TestDeployNetworkPoliciesAdmitOnlyWhatEachPortServes(t *testing.T) {
	const monitoring = "namespace kubernetes.io/metadata.name=monitoring"
	want := map[string][]string{
		"database-apiserver":  {"anyone -> https"},
		"database-controller": {monitoring + " -> https"},
		"database-etcd": {"pod app.kubernetes.io/name=database-apiserver -> client",
			"pod app.kubernetes.io/name=database-etcd -> client", "pod app.kubernetes.io/name=database-etcd -> peer",
			monitoring + " -> metrics"},
	}
	t.Run("artifacts/deploy", func(t *testing.T) {
		checkNetworkPolicies(t, kustomize(t, "artifacts/deploy"), want)
	})
	t.Run("only namespaced controllers", func(t *testing.T) {
		namespacedOnly := maps.Clone(want)
		delete(namespacedOnly, "database-controller")
		for _, c := range namespacedControllers {
			namespacedOnly["database-controller-"+c.namespace] = want["database-controller"]
		}
		checkNetworkPolicies(t, kustomize(t, namespacedOnlyInstall(t)), namespacedOnly)
	})
}

// checkNetworkPolicies requires the NetworkPolicies of objs to deny all ingress but the
// (source, port) pairs want lists per workload (by its app.kubernetes.io/name).
func checkNetworkPolicies(t *testing.T, objs []*unstructured.Unstructured, want map[string][]string) {
	t.Helper()
	// Named container ports of each workload, by its app.kubernetes.io/name.
	ports := map[string][]string{}
	for _, o := range objs {
		if o.GetKind() != "Deployment" && o.GetKind() != "StatefulSet" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			list, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
			for _, p := range list {
				ports[o.GetName()] = append(ports[o.GetName()], p.(map[string]any)["name"].(string))
			}
		}
	}
	selector := func(m map[string]any, key string) string {
		labels, _, _ := unstructured.NestedStringMap(m, key, "matchLabels")
		require.Len(t, labels, 1, "%s: %v", key, m)
		for k, v := range labels {
			return k + "=" + v
		}
		return ""
	}

	got := map[string][]string{}
	var denyAll bool
	for _, o := range objs {
		if o.GetKind() != "NetworkPolicy" {
			continue
		}
		require.Equal(t, installNamespace, o.GetNamespace())
		types, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "policyTypes")
		require.Equal(t, []string{"Ingress"}, types, o.GetName())
		podSelector, _, _ := unstructured.NestedMap(o.Object, "spec", "podSelector")
		rules, found, _ := unstructured.NestedSlice(o.Object, "spec", "ingress")
		if len(podSelector) == 0 {
			require.False(t, found, "%s: the policy selecting every Pod admits nothing", o.GetName())
			denyAll = true
			continue
		}
		workload := strings.TrimPrefix(selector(o.Object["spec"].(map[string]any), "podSelector"), "app.kubernetes.io/name=")
		require.Contains(t, ports, workload, "%s selects a workload of the install", o.GetName())
		for _, r := range rules {
			rule := r.(map[string]any)
			sources := []string{"anyone"}
			if from, ok := rule["from"].([]any); ok {
				sources = nil
				for _, f := range from {
					peer := f.(map[string]any)
					require.NotContains(t, peer, "ipBlock")
					switch {
					case peer["namespaceSelector"] != nil:
						require.NotContains(t, peer, "podSelector", "whole namespaces only")
						sources = append(sources, "namespace "+selector(peer, "namespaceSelector"))
					default:
						sources = append(sources, "pod "+selector(peer, "podSelector"))
					}
				}
			}
			list, _, _ := unstructured.NestedSlice(rule, "ports")
			require.NotEmpty(t, list, "%s: every rule names its ports", o.GetName())
			for _, p := range list {
				port, ok := p.(map[string]any)["port"].(string)
				require.True(t, ok, "%s: ports by name", o.GetName())
				require.Contains(t, ports[workload], port, "%s: %s is a port of %s", o.GetName(), port, workload)
				for _, src := range sources {
					got[workload] = append(got[workload], src+" -> "+port)
				}
			}
		}
	}
	require.True(t, denyAll, "a policy denies all ingress to the namespace")
	require.Len(t, got, len(want))
	for workload, pairs := range want {
		require.ElementsMatch(t, pairs, got[workload], workload)
	}
}

// TestDeployEachPodHasOneWorkloadAndOneDisruptionBudget checks the selectors of every install,
// the namespaced controllers next to the cluster-wide one included: the Pods of each workload
// are selected by its own selector alone (controllers whose selectors overlap fight over each
// other's Pods) and by exactly one PodDisruptionBudget (the eviction API refuses to evict a Pod
// that several budgets select).
func TestDeployEachPodHasOneWorkloadAndOneDisruptionBudget(t *testing.T) {
	withNamespaced := []string{"artifacts/deploy"}
	for _, c := range namespacedControllers {
		withNamespaced = append(withNamespaced, c.dir)
	}
	for name, dir := range map[string]string{
		"artifacts/deploy":                           "artifacts/deploy",
		"artifacts/deploy and controller-namespaced": composed(t, withNamespaced, nil),
		"only namespaced controllers":                namespacedOnlyInstall(t),
	} {
		t.Run(name, func(t *testing.T) {
			objs := kustomize(t, dir)
			selectorOf := func(o *unstructured.Unstructured, fields ...string) labels.Selector {
				m, found, err := unstructured.NestedMap(o.Object, fields...)
				require.NoError(t, err)
				require.True(t, found, "%s %s: %v", o.GetKind(), o.GetName(), fields)
				var ls metav1.LabelSelector
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ls))
				sel, err := metav1.LabelSelectorAsSelector(&ls)
				require.NoError(t, err)
				require.False(t, sel.Empty(), "%s %s selects everything", o.GetKind(), o.GetName())
				return sel
			}
			var workloads, budgets []*unstructured.Unstructured
			for _, o := range objs {
				switch o.GetKind() {
				case "Deployment", "StatefulSet":
					workloads = append(workloads, o)
				case "PodDisruptionBudget":
					budgets = append(budgets, o)
				}
			}
			require.Len(t, budgets, len(workloads))
			for _, w := range workloads {
				podLabels, _, _ := unstructured.NestedStringMap(w.Object, "spec", "template", "metadata", "labels")
				var selectedBy, coveredBy []string
				for _, other := range workloads {
					if selectorOf(other, "spec", "selector").Matches(labels.Set(podLabels)) {
						selectedBy = append(selectedBy, other.GetName())
					}
				}
				for _, b := range budgets {
					if selectorOf(b, "spec", "selector").Matches(labels.Set(podLabels)) {
						coveredBy = append(coveredBy, b.GetName())
					}
				}
				require.Equal(t, []string{w.GetName()}, selectedBy, "the workloads selecting the Pods of %s", w.GetName())
				require.Equal(t, []string{w.GetName()}, coveredBy, "the budgets selecting the Pods of %s", w.GetName())
			}
		})
	}
}

// TestDeployFlagsAreKnownToTheBinaries runs bin/database-apiserver and bin/database-controller
// with the rendered container arguments and --help: an unknown or misspelt flag fails the
// parse before help is printed.
func TestDeployFlagsAreKnownToTheBinaries(t *testing.T) {
	type deployment struct{ dir, name, binary string }
	deployments := []deployment{
		{"artifacts/deploy", "database-apiserver", "database-apiserver"},
		{"artifacts/deploy", "database-controller", "database-controller"},
	}
	for _, c := range namespacedControllers {
		deployments = append(deployments, deployment{c.dir, "database-controller-" + c.namespace, "database-controller"})
	}
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			binary := d.binary
			path := filepath.Join(root, "bin", binary)
			if _, err := os.Stat(path); err != nil {
				t.Skipf("%s not built: %v", path, err)
			}
			o := find(t, kustomize(t, d.dir), "Deployment", d.name)
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], "$(POD_NAMESPACE)", installNamespace)
			}
			var stderr bytes.Buffer
			cmd := exec.Command(path, append(args, "--help")...)
			cmd.Stdout, cmd.Stderr = io.Discard, &stderr
			require.NoError(t, cmd.Run(), "%s %s: %s", binary, strings.Join(args, " "), stderr.String())
		})
	}
}

// TestDeployLivenessProbeExcludesEtcd asks our running server for the liveness probe's path:
// the exclusion names a real check (k8s.io/apiserver warns about names it does not know).
func TestDeployLivenessProbeExcludesEtcd(t *testing.T) {
	pool, err := certutil.NewPoolFromBytes(cluster.ServingCAPEM())
	require.NoError(t, err)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(cluster.APIServerURL + "/livez?exclude=etcd&verbose")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), "[+]etcd excluded: ok")
	require.NotContains(t, string(body), "cannot be excluded")
}

// serviceAccount is the impersonation flags of the ServiceAccount sa of installNamespace, with
// the groups of a ServiceAccount token, as a Pod running as it has them.
func serviceAccount(sa string) []string {
	return []string{"--as=system:serviceaccount:" + installNamespace + ":" + sa,
		"--as-group=system:serviceaccounts", "--as-group=system:serviceaccounts:" + installNamespace,
		"--as-group=system:authenticated"}
}

// canI asks kube-apiserver whether the identity given by the impersonation flags as may do
// what args say.
func canI(t *testing.T, as []string, args ...string) bool {
	t.Helper()
	args = append(append([]string{"auth", "can-i"}, args...), as...)
	out, errOut, err := kubectlAs(cluster.KubeconfigPath, "", args...)
	answer := strings.TrimSpace(out)
	var exit *exec.ExitError
	switch {
	case err == nil && answer == "yes":
		return true
	case errors.As(err, &exit) && exit.ExitCode() == 1 && answer == "no":
		return false
	}
	require.FailNow(t, "kubectl auth can-i", "%s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	return false
}

// permission is one `kubectl auth can-i` question and the answer it must get.
type permission struct {
	allowed bool
	args    []string
}

func can(args ...string) permission    { return permission{true, args} }
func cannot(args ...string) permission { return permission{false, args} }

func checkPermissions(t *testing.T, as []string, perms []permission) {
	t.Helper()
	for _, p := range perms {
		t.Run(fmt.Sprintf("%v %s", p.allowed, strings.Join(p.args, " ")), func(t *testing.T) {
			require.Equal(t, p.allowed, canI(t, as, p.args...))
		})
	}
}

// TestDeployServiceAccountsHaveLeastPrivilege checks, against the RBAC of artifacts/rbac that
// the local cluster applied, that each ServiceAccount of the install can do what it needs
// and not more, and, in the rendered overlays, that each namespaced controller runs as its
// own ServiceAccount with rights in the namespace it reconciles.
func TestDeployServiceAccountsHaveLeastPrivilege(t *testing.T) {
	writeRBAC := []permission{
		cannot("create", "clusterroles.rbac.authorization.k8s.io"),
		cannot("create", "clusterrolebindings.rbac.authorization.k8s.io"),
		cannot("create", "roles.rbac.authorization.k8s.io", "-A"),
		cannot("create", "rolebindings.rbac.authorization.k8s.io", "-A"),
		cannot("create", "rolebindings.rbac.authorization.k8s.io", "-n", installNamespace),
		cannot("bind", "clusterroles.rbac.authorization.k8s.io"),
		cannot("escalate", "clusterroles.rbac.authorization.k8s.io"),
		cannot("impersonate", "users"),
	}

	t.Run("database-apiserver", func(t *testing.T) {
		checkPermissions(t, serviceAccount("database-apiserver"), append([]permission{
			// Delegated authentication and authorization (system:auth-delegator).
			can("create", "tokenreviews.authentication.k8s.io"),
			can("create", "subjectaccessreviews.authorization.k8s.io"),
			// The front-proxy CA and header names (extension-apiserver-authentication-reader).
			can("get", "configmaps/extension-apiserver-authentication", "-n", "kube-system"),
			can("watch", "configmaps/extension-apiserver-authentication", "-n", "kube-system"),
			cannot("get", "configmaps/coredns", "-n", "kube-system"),
			// NamespaceLifecycle, the webhook and policy admission plugins, priority and fairness.
			can("list", "namespaces"),
			can("watch", "namespaces"),
			can("list", "validatingwebhookconfigurations.admissionregistration.k8s.io"),
			can("watch", "mutatingwebhookconfigurations.admissionregistration.k8s.io"),
			can("list", "validatingadmissionpolicies.admissionregistration.k8s.io"),
			can("list", "validatingadmissionpolicybindings.admissionregistration.k8s.io"),
			can("list", "flowschemas.flowcontrol.apiserver.k8s.io"),
			can("watch", "prioritylevelconfigurations.flowcontrol.apiserver.k8s.io"),
			// ResourceQuota admission: reads quotas, charges a created Database to their status.
			can("list", "resourcequotas", "-A"),
			can("watch", "resourcequotas", "-A"),
			can("update", "resourcequotas", "--subresource=status", "-A"),
			// databasebackups and the restore check: a backup store's keys, a Secret read by
			// the name a Database gives, never listed, watched or written.
			can("get", "secrets", "-A"),
			// Nothing else.
			cannot("create", "resourcequotas", "-A"),
			cannot("update", "resourcequotas", "-A"),
			cannot("delete", "resourcequotas", "-A"),
			cannot("create", "namespaces"),
			cannot("delete", "namespaces"),
			cannot("create", "secrets", "-n", installNamespace),
			cannot("list", "secrets", "-A"),
			cannot("watch", "secrets", "-A"),
			cannot("update", "secrets", "-A"),
			cannot("delete", "secrets", "-A"),
			cannot("list", "configmaps", "-A"),
			cannot("create", "validatingwebhookconfigurations.admissionregistration.k8s.io"),
			cannot("update", "flowschemas.flowcontrol.apiserver.k8s.io"),
			cannot("create", "pods", "-n", installNamespace),
			cannot("list", "nodes"),
			cannot("create", "databases.example.com", "-A"),
		}, writeRBAC...))
	})

	t.Run("database-controller", func(t *testing.T) {
		files, err := filepath.Glob(filepath.Join(root, "artifacts", "rbac", "controller-*.yaml"))
		require.NoError(t, err)
		if len(files) == 0 {
			t.Skip("no artifacts/rbac/controller-*.yaml yet")
		}
		checkPermissions(t, serviceAccount("database-controller"), append([]permission{
			// Databases: read, finalizer and status; children in any namespace.
			can("list", "databases.example.com", "-A"),
			can("watch", "databases.example.com", "-A"),
			can("patch", "databases.example.com", "-n", "production"),
			can("update", "databases.example.com", "--subresource=status", "-A"),
			can("create", "statefulsets.apps", "-A"),
			can("create", "statefulsets.apps", "-n", "production"),
			can("update", "statefulsets.apps", "-A"),
			can("create", "services", "-A"),
			can("create", "secrets", "-A"),
			can("create", "jobs.batch", "-A"),
			can("watch", "jobs.batch", "-A"),
			cannot("update", "jobs.batch", "-A"),
			cannot("delete", "jobs.batch", "-A"),
			can("create", "events", "-n", "production"),
			can("watch", "events", "-A"),
			cannot("delete", "events", "-A"),
			// Leader election on its own Lease only.
			can("create", "leases.coordination.k8s.io", "-n", installNamespace),
			can("update", "leases.coordination.k8s.io/database-controller", "-n", installNamespace),
			cannot("update", "leases.coordination.k8s.io/kube-controller-manager", "-n", "kube-system"),
			cannot("update", "leases.coordination.k8s.io/other", "-n", installNamespace),
			// Not its business.
			cannot("delete", "namespaces"),
			cannot("create", "namespaces"),
			cannot("create", "deployments.apps", "-A"),
			cannot("update", "deployments.apps", "-n", "production"),
			cannot("delete", "deployments.apps", "-A"),
			cannot("create", "daemonsets.apps", "-A"),
			cannot("patch", "daemonsets.apps", "-A"),
			cannot("get", "nodes"),
			cannot("update", "nodes"),
			cannot("create", "pods", "-A"),
			cannot("create", "databases.example.com", "-A"),
			// Its secure port's delegated authentication and authorization, as the API
			// server's (system:auth-delegator, extension-apiserver-authentication-reader).
			can("create", "tokenreviews.authentication.k8s.io"),
			can("create", "subjectaccessreviews.authorization.k8s.io"),
			can("get", "configmaps/extension-apiserver-authentication", "-n", "kube-system"),
			can("watch", "configmaps/extension-apiserver-authentication", "-n", "kube-system"),
		}, writeRBAC...))
	})

	// A namespaced controller runs as its own ServiceAccount, whose RBAC (the overlay's, which
	// TestNamespacedControllerRBACReadsOnlyItsNamespace asks kube-apiserver about) grants the
	// ClusterRole database-controller in one namespace: the one its --namespace names. It
	// elects on the Lease its Role lets it update, the controller's default name with
	// --namespace.
	for _, c := range namespacedControllers {
		t.Run(c.dir, func(t *testing.T) {
			objs := kustomize(t, c.dir)
			var sa string
			for _, o := range objs {
				if o.GetKind() == "ServiceAccount" {
					require.Empty(t, sa, "one ServiceAccount")
					sa = o.GetName()
				}
			}
			require.Equal(t, "database-controller-"+c.namespace, sa)
			d := find(t, objs, "Deployment", sa)
			name, _, _ := unstructured.NestedString(d.Object, "spec", "template", "spec", "serviceAccountName")
			require.Equal(t, sa, name)
			containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], "$(POD_NAMESPACE)", d.GetNamespace())
			}
			o := controllerapp.NewOptions()
			fs := pflag.NewFlagSet("database-controller", pflag.ContinueOnError)
			for _, set := range o.Flags().FlagSets {
				fs.AddFlagSet(set)
			}
			require.NoError(t, fs.Parse(args))
			require.False(t, fs.Changed("leader-elect-resource-name"), "the Lease is the default of --namespace")
			o.Complete()
			require.NoError(t, o.Validate())
			require.Equal(t, c.namespace, o.Namespace)

			subject := map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": installNamespace}
			var granted []string
			for _, b := range objs {
				ref, _, _ := unstructured.NestedStringMap(b.Object, "roleRef")
				subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
				switch b.GetKind() {
				case "RoleBinding", "ClusterRoleBinding":
					require.Equal(t, []any{subject}, subjects, "%s %s binds the controller's ServiceAccount only", b.GetKind(), b.GetName())
				default:
					continue
				}
				if b.GetKind() == "ClusterRoleBinding" {
					// Only the delegated authentication of its secure port is cluster-wide.
					require.Equal(t, "system:auth-delegator", ref["name"], b.GetName())
				}
				if ref["kind"] == "ClusterRole" && ref["name"] == "database-controller" {
					granted = append(granted, b.GetKind()+" "+b.GetNamespace())
				}
			}
			require.Equal(t, []string{"RoleBinding " + o.Namespace}, granted, "where the ClusterRole database-controller is granted")

			role := find(t, objs, "Role", sa)
			require.Equal(t, o.LeaderElection.ResourceNamespace, role.GetNamespace())
			require.Equal(t, "database-controller-"+c.namespace, o.LeaderElection.ResourceName)
			rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
			var leases []string
			for _, r := range rules {
				rule := r.(map[string]any)
				resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
				verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
				if slices.Contains(resources, "leases") && slices.Contains(verbs, "update") {
					names, _, _ := unstructured.NestedStringSlice(rule, "resourceNames")
					leases = append(leases, names...)
				}
			}
			require.Equal(t, []string{o.LeaderElection.ResourceName}, leases, "the Leases it may update")
		})
	}

	t.Run("database-etcd", func(t *testing.T) {
		// No binding names it, and its Pods mount no token.
		checkPermissions(t, serviceAccount("database-etcd"), append([]permission{
			cannot("get", "secrets", "-n", installNamespace),
			cannot("list", "pods", "-n", installNamespace),
			cannot("get", "configmaps", "-n", installNamespace),
			cannot("list", "namespaces"),
			cannot("create", "tokenreviews.authentication.k8s.io"),
			cannot("get", "databases.example.com", "-A"),
		}, writeRBAC...))
		sa := find(t, kustomize(t, "artifacts/deploy"), "ServiceAccount", "database-etcd")
		automount, found, _ := unstructured.NestedBool(sa.Object, "automountServiceAccountToken")
		require.True(t, found)
		require.False(t, automount)
	})
}

// TestDeployUserRolesGrantEachSubresourceItsVerbs checks the aggregated ClusterRoles through
// the default view and edit roles: users scale Databases with edit, read their status, and
// never write it (the controller's job).
func TestDeployUserRolesGrantEachSubresourceItsVerbs(t *testing.T) {
	applyExamples(t)
	kubectl(t, "create", "rolebinding", "e2e-deploy-view", "-n", "production", "--clusterrole=view", "--user=e2e-deploy-viewer")
	kubectl(t, "create", "rolebinding", "e2e-deploy-edit", "-n", "production", "--clusterrole=edit", "--user=e2e-deploy-editor")
	t.Cleanup(func() {
		kubectlAs(cluster.KubeconfigPath, "", "delete", "rolebinding", "-n", "production", "e2e-deploy-view", "e2e-deploy-edit")
	})
	viewer := []string{"--as=e2e-deploy-viewer"}
	editor := []string{"--as=e2e-deploy-editor"}
	// The aggregation controller merges our rules into view and edit shortly after they exist.
	eventually(t, 30*time.Second, func() error {
		if !canI(t, editor, "patch", "databases.example.com", "--subresource=scale", "-n", "production") {
			return errors.New("edit does not include example.com:databases:edit yet")
		}
		if !canI(t, viewer, "get", "databases.example.com", "-n", "production") {
			return errors.New("view does not include example.com:databases:view yet")
		}
		return nil
	})
	t.Run("view", func(t *testing.T) {
		checkPermissions(t, viewer, []permission{
			can("list", "databases.example.com", "-n", "production"),
			can("get", "databases.example.com", "--subresource=status", "-n", "production"),
			can("get", "databases.example.com", "--subresource=scale", "-n", "production"),
			cannot("patch", "databases.example.com", "--subresource=scale", "-n", "production"),
			cannot("update", "databases.example.com", "--subresource=status", "-n", "production"),
			cannot("create", "databases.example.com", "-n", "production"),
			cannot("list", "databases.example.com", "-n", "kube-system"),
		})
	})
	t.Run("edit", func(t *testing.T) {
		checkPermissions(t, editor, []permission{
			can("create", "databases.example.com", "-n", "production"),
			can("deletecollection", "databases.example.com", "-n", "production"),
			can("update", "databases.example.com", "--subresource=scale", "-n", "production"),
			can("get", "databases.example.com", "--subresource=status", "-n", "production"),
			cannot("update", "databases.example.com", "--subresource=status", "-n", "production"),
			cannot("patch", "databases.example.com", "--subresource=status", "-n", "production"),
			cannot("update", "databases.example.com", "--subresource=finalizers", "-n", "production"),
			cannot("create", "databases.example.com", "-n", "kube-system"),
		})
	})
}

// TestDeployAPIServerStopsWithinItsTerminationGracePeriod parses the rendered container
// arguments of database-apiserver with the server's own flags and defaults: the longest stop,
// --shutdown-delay-duration and then the drain of in-flight requests and the HTTP server's
// shutdown (both bounded by --request-timeout), must end before the kubelet's SIGKILL at
// terminationGracePeriodSeconds, and watches must be ended on shutdown (a positive
// --shutdown-watch-termination-grace-period), else every stop waits --request-timeout for the
// watches kube-apiserver proxies.
func TestDeployAPIServerStopsWithinItsTerminationGracePeriod(t *testing.T) {
	for _, dir := range []string{"artifacts/deploy", "artifacts/deploy/cert-manager"} {
		t.Run(dir, func(t *testing.T) {
			d := find(t, kustomize(t, dir), "Deployment", "database-apiserver")
			graceSeconds, found, err := unstructured.NestedInt64(d.Object, "spec", "template", "spec", "terminationGracePeriodSeconds")
			require.NoError(t, err)
			require.True(t, found, "terminationGracePeriodSeconds is set")
			containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")

			o := apiserver.NewOptions(io.Discard, io.Discard)
			fs := pflag.NewFlagSet("database-apiserver", pflag.ContinueOnError)
			for _, set := range o.Flags().FlagSets {
				fs.AddFlagSet(set)
			}
			require.NoError(t, fs.Parse(args))
			run := o.ServerRun
			require.Positive(t, run.ShutdownWatchTerminationGracePeriod, "--shutdown-watch-termination-grace-period")
			longestStop := run.ShutdownDelayDuration + max(run.RequestTimeout, run.ShutdownWatchTerminationGracePeriod)
			if run.ShutdownSendRetryAfter {
				// The HTTP server shuts down only once requests drained, in at most 2s.
				longestStop += 2 * time.Second
			}
			require.Less(t, longestStop, time.Duration(graceSeconds)*time.Second,
				"--shutdown-delay-duration %v + --request-timeout %v against terminationGracePeriodSeconds %d",
				run.ShutdownDelayDuration, run.RequestTimeout, graceSeconds)
		})
	}
}
