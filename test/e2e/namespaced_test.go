//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"example.com/database-apiserver/internal/localcluster"
	dbcontroller "example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/names"
)

// TestNamespacedControllerRBACReadsOnlyItsNamespace applies the shipped overlay
// artifacts/controller-namespaced/a and acts as its ServiceAccount database-controller-a:
// reads and writes of Secrets, StatefulSets and Databases are allowed in a and refused in b,
// in database-system and cluster-wide; in database-system it has its Lease and the release
// records by name, nothing to list; and the admission policies bound it as they bound the
// cluster-wide controller; and database-controller --namespace=a, run with these rights,
// reconciles the Databases of a (runNamespacedController).
func TestNamespacedControllerRBACReadsOnlyItsNamespace(t *testing.T) {
	testNamespace(t, "a")
	testNamespace(t, "b")
	kubectl(t, "apply", "-k", "artifacts/controller-namespaced/a")
	t.Cleanup(func() {
		kubectlAs(cluster.KubeconfigPath, "", "delete", "-k", "artifacts/controller-namespaced/a", "--ignore-not-found", "--wait=false")
	})
	as := serviceAccount("database-controller-a")

	var perms []permission
	for _, resource := range []string{"secrets", "statefulsets.apps", "databases.example.com"} {
		for _, verb := range []string{"get", "list", "watch", "update"} {
			perms = append(perms,
				can(verb, resource, "-n", "a"),
				cannot(verb, resource, "-n", "b"),
				cannot(verb, resource, "-n", installNamespace),
				cannot(verb, resource, "--all-namespaces"))
		}
	}
	perms = append(perms,
		can("create", "secrets", "-n", "a"),
		cannot("create", "secrets", "-n", "b"),
		can("create", "statefulsets.apps", "-n", "a"),
		cannot("create", "statefulsets.apps", "-n", "b"),
		can("create", "jobs.batch", "-n", "a"),
		can("watch", "jobs.batch", "-n", "a"),
		cannot("create", "jobs.batch", "-n", "b"),
		cannot("watch", "jobs.batch", "--all-namespaces"),
		can("list", "persistentvolumeclaims", "-n", "a"),
		cannot("list", "persistentvolumeclaims", "--all-namespaces"),
		can("list", "events", "-n", "a"),
		cannot("list", "events", "--all-namespaces"),
		// Its own Lease, not another namespace's controller's, and none to list.
		can("update", "leases.coordination.k8s.io/database-controller-a", "-n", installNamespace),
		cannot("update", "leases.coordination.k8s.io/database-controller-b", "-n", installNamespace),
		cannot("update", "leases.coordination.k8s.io/database-controller", "-n", installNamespace),
		cannot("list", "leases.coordination.k8s.io", "-n", installNamespace),
		// The release records, by name.
		can("get", "configmaps/released.a.db", "-n", installNamespace),
		can("create", "configmaps", "-n", installNamespace),
		cannot("list", "configmaps", "-n", installNamespace),
		cannot("watch", "configmaps", "-n", installNamespace),
		// Nothing cluster-scoped to read.
		cannot("list", "storageclasses.storage.k8s.io"),
		cannot("list", "nodes"),
		cannot("list", "namespaces"),
	)
	checkPermissions(t, as, perms)

	cfg := rest.CopyConfig(cluster.AdminConfig)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + installNamespace + ":database-controller-a",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + installNamespace, "system:authenticated"},
	}
	k, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	t.Run("its children are admitted in a", func(t *testing.T) {
		built, err := specs.NewChildren(policyDatabase("a"), "e2e-password", "database-system")
		require.NoError(t, err)
		_, err = k.CoreV1().Secrets("a").Create(ctx, built.Secret, dryRun)
		require.NoError(t, err)
		_, err = k.AppsV1().StatefulSets("a").Create(ctx, built.StatefulSet, dryRun)
		require.NoError(t, err)
	})
	t.Run("the same children in b are refused by RBAC", func(t *testing.T) {
		built, err := specs.NewChildren(policyDatabase("b"), "e2e-password", "database-system")
		require.NoError(t, err)
		_, err = k.CoreV1().Secrets("b").Create(ctx, built.Secret, dryRun)
		require.True(t, apierrors.IsForbidden(err), "want 403 Forbidden, got %v", err)
		require.NotContains(t, err.Error(), "ValidatingAdmissionPolicy")
		_, err = k.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "a cluster-wide list of Secrets: want 403 Forbidden, got %v", err)
	})
	t.Run("the admission policies bound it", func(t *testing.T) {
		planted := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "planted", Namespace: "a"},
			StringData: map[string]string{"password": "known"},
		}
		_, err := k.CoreV1().Secrets("a").Create(ctx, planted, dryRun)
		requireRefused(t, err, "database-controller-children", "its controller ownerReference must be an example.com/v1 Database")

		// Its release records are those of a only.
		record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: dbcontroller.ReleasedRecordName("b", "db"),
			Labels:      map[string]string{names.ManagedByLabel: names.ManagedByValue},
			Annotations: map[string]string{dbcontroller.RetainedFromAnnotation: "b/db"}},
			Data: map[string]string{"00000000-0000-4000-8000-000000000006": "Secret db-credentials"}}
		_, err = k.CoreV1().ConfigMaps(installNamespace).Create(ctx, record, dryRun)
		requireRefused(t, err, "database-controller-releases",
			"system:serviceaccount:"+installNamespace+":database-controller-a may write only the release records of its own namespace")
		record.Name, record.Annotations[dbcontroller.RetainedFromAnnotation] = dbcontroller.ReleasedRecordName("a", "db"), "a/db"
		_, err = k.CoreV1().ConfigMaps(installNamespace).Create(ctx, record, dryRun)
		require.NoError(t, err)
	})
	t.Run("a controller with --namespace=a and these rights makes a Database of a Ready", runNamespacedController)
}

// runNamespacedController stops the cluster-wide controller (the e2e tests run one at a time;
// it is started again after) and runs database-controller --namespace=a with the rights of
// database-controller-a (a kubeconfig impersonating it), the overlay applied: a Database of a
// becomes Ready, one of b is left alone, it leads on its own Lease, and none of its requests
// is forbidden.
func runNamespacedController(t *testing.T) {
	ctx := context.Background()

	kubeconfig, err := clientcmd.LoadFromFile(cluster.KubeconfigPath)
	require.NoError(t, err)
	for _, user := range kubeconfig.AuthInfos {
		user.Impersonate = "system:serviceaccount:" + installNamespace + ":database-controller-a"
		user.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + installNamespace, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kubeconfig, path))

	require.NoError(t, cluster.StopComponent(localcluster.ControllerName))
	t.Cleanup(func() { require.NoError(t, cluster.StartController(ctx)) })

	logFile, err := os.Create(filepath.Join(t.TempDir(), "database-controller-a.log"))
	require.NoError(t, err)
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(root, "bin", "database-controller"), "--kubeconfig="+path, "--namespace=a",
		"--secure-port=0", "--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=5s",
		"--leader-elect-retry-period=1s")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	}
	defer stop()

	kubectlIn(t, databaseIn("a", "db", 1, ""), "apply", "-f", "-")
	kubectlIn(t, databaseIn("b", "db", 1, ""), "apply", "-f", "-")
	waitReady(t, "a", "db", 1)
	lease, err := kube(t).CoordinationV1().Leases(installNamespace).Get(ctx, "database-controller-a", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, lease.Spec.HolderIdentity)
	require.NotEmpty(t, *lease.Spec.HolderIdentity)

	other, err := getDatabase(t, "b", "db")
	require.NoError(t, err)
	require.Empty(t, other.Finalizers, "the Database of b was reconciled")
	require.Empty(t, other.Status.Phase, "the Database of b was reconciled")
	stop()
	log, err := os.ReadFile(logFile.Name())
	require.NoError(t, err)
	require.NotContains(t, string(log), "is forbidden", "a request outside its rights")
}
