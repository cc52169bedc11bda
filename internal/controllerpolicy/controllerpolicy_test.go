package controllerpolicy_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/internal/controllerpolicy"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
	"example.com/database-apiserver/pkg/controller/specs"

	// The policies are held against the children of every engine of the repository.
	_ "example.com/database-apiserver/pkg/engine/engines"
)

// controllerUser is the cluster-wide controller's ServiceAccount user; namespacedUser a
// controller run with --namespace=production.
const (
	controllerUser = "system:serviceaccount:database-system:database-controller"
	namespacedUser = "system:serviceaccount:database-system:database-controller-production"
)

func loadPolicies(t *testing.T) []*controllerpolicy.Policy {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	policies, err := controllerpolicy.Load(filepath.Join(filepath.Dir(file), "..", "..", "artifacts", "policy"))
	require.NoError(t, err)
	require.NotEmpty(t, policies)
	return policies
}

var (
	statefulSets = appsv1.SchemeGroupVersion.WithResource("statefulsets")
	statefulSet  = appsv1.SchemeGroupVersion.WithKind("StatefulSet")
)

// write is the create (old nil) or update of obj, of kind and resource, by user.
func write(user string, kind schema.GroupVersionKind, resource schema.GroupVersionResource, obj, old k8sruntime.Object) controllerpolicy.Request {
	m := obj.(metav1.Object)
	op := admission.Create
	if old != nil {
		op = admission.Update
	}
	return controllerpolicy.Request{Operation: op, Object: obj, OldObject: old, Kind: kind, Resource: resource,
		Namespace: m.GetNamespace(), Name: m.GetName(), User: user}
}

// denials holds r against policies and returns the refusals as strings.
func denials(t *testing.T, policies []*controllerpolicy.Policy, r controllerpolicy.Request) []string {
	t.Helper()
	ds, err := controllerpolicy.Validate(policies, r)
	require.NoError(t, err)
	var out []string
	for _, d := range ds {
		out = append(out, d.String())
	}
	return out
}

// requireDenied requires r refused by policy alone, its first failed validation's message
// holding want: kube-apiserver reports the first failed validation of one refusing policy,
// whichever it meets first.
func requireDenied(t *testing.T, policies []*controllerpolicy.Policy, r controllerpolicy.Request, policy, want string) {
	t.Helper()
	ds, err := controllerpolicy.Validate(policies, r)
	require.NoError(t, err)
	require.Len(t, ds, 1, "want a refusal by %s alone, got %v", policy, ds)
	require.Equal(t, policy, ds[0].Policy)
	require.Contains(t, ds[0].Messages[0], want)
}

func database(engine examplev1.Engine, version string, replicas int32) *examplev1.Database {
	return &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: "my-database", UID: "0b6b3a4e-7d3c-4a8e-9f00-5d2a1c3b4e5f"},
		Spec: examplev1.DatabaseSpec{
			Engine: engine, Version: version, Replicas: ptr.To(replicas), Storage: "100Gi",
		},
	}
}

var engines = []examplev1.Engine{examplev1.EnginePostgreSQL, examplev1.EngineMySQL, examplev1.EngineMongoDB}

// The StatefulSet the controller builds, for every engine and catalog line, one replica or
// three, restarted or not, with the controller's --cluster-domain and --superuser-sources or
// without, created or updated (by SyncStatefulSet from an older version), by the cluster-wide
// or a namespaced controller, is admitted.
func TestTheControllersStatefulSetsAreAdmitted(t *testing.T) {
	policies := loadPolicies(t)
	for _, e := range engines {
		for _, line := range catalog.Lines(e) {
			for _, replicas := range []int32{1, 3} {
				name := fmt.Sprintf("%s %s, %d replicas", e, line, replicas)
				db := database(e, line, replicas)
				built, err := specs.NewChildren(db, "password", "database-system")
				require.NoError(t, err, name)
				for _, user := range []string{controllerUser, namespacedUser} {
					require.Empty(t, denials(t, policies, write(user, statefulSet, statefulSets, built.StatefulSet, nil)), name)
				}

				db.Status.Restart = &examplev1.DatabaseRestartStatus{RequestedAt: metav1.NowMicro()}
				restarted, err := specs.NewChildren(db, "password", "database-system")
				require.NoError(t, err, name)
				have := built.StatefulSet.DeepCopy()
				specs.SyncStatefulSet(have, restarted.StatefulSet)
				require.Empty(t, denials(t, policies, write(controllerUser, statefulSet, statefulSets, have, built.StatefulSet)), name+", restarted")

				// The controller's --cluster-domain and --superuser-sources: PostgreSQL's
				// template gets the digest of other pg_hba.conf rules, MySQL's database
				// container MYSQL_ROOT_HOST, and the setup containers other hosts; created,
				// and rolled out over the StatefulSet built without them.
				d, err := specs.Resolve(db)
				require.NoError(t, err, name)
				d.ClusterDomain = "corp.example.test"
				d.SuperuserSources = []netip.Prefix{netip.MustParsePrefix("10.245.0.1/32"), netip.MustParsePrefix("10.96.0.0/12")}
				options := specs.StatefulSet(db, d)
				require.Empty(t, denials(t, policies, write(controllerUser, statefulSet, statefulSets, options, nil)), name+", with options")
				have = built.StatefulSet.DeepCopy()
				specs.SyncStatefulSet(have, options)
				require.NotEqual(t, built.StatefulSet.Spec.Template, have.Spec.Template, name+", with options")
				require.Empty(t, denials(t, policies, write(controllerUser, statefulSet, statefulSets, have, built.StatefulSet)), name+", with options, updated")
			}
		}
	}
}

// A StatefulSet without a Database owner is refused by database-controller-children alone.
func TestStatefulSetsWithoutADatabaseOwnerAreRefusedAsChildren(t *testing.T) {
	policies := loadPolicies(t)
	built, err := specs.NewChildren(database(examplev1.EnginePostgreSQL, "16", 3), "password", "database-system")
	require.NoError(t, err)
	for name, owners := range map[string][]metav1.OwnerReference{
		"none":         nil,
		"a Deployment": {{APIVersion: "apps/v1", Kind: "Deployment", Name: "my-database", UID: "5c1e6a1e-9a53-4b8c-8f44-6a0a4e0b1a12", Controller: ptr.To(true)}},
	} {
		sts := built.StatefulSet.DeepCopy()
		sts.OwnerReferences = owners
		requireDenied(t, policies, write(controllerUser, statefulSet, statefulSets, sts, nil), "database-controller-children",
			"its controller ownerReference must be an example.com/v1 Database")
		t.Logf("%s: refused", name)
	}
}

// Every change of controllerpolicy.StatefulSetChanges is refused, for every engine, created
// or updated, with its reason.
func TestStatefulSetsOfOtherShapesAreRefused(t *testing.T) {
	policies := loadPolicies(t)
	for _, e := range engines {
		built, err := specs.NewChildren(database(e, catalog.Lines(e)[0], 3), "password", "database-system")
		require.NoError(t, err)
		for _, tc := range controllerpolicy.StatefulSetChanges() {
			t.Run(string(e)+" "+tc.Name, func(t *testing.T) {
				sts := built.StatefulSet.DeepCopy()
				tc.Change(sts)
				requireDenied(t, policies, write(controllerUser, statefulSet, statefulSets, sts, nil), tc.Policy, tc.Want)
				requireDenied(t, policies, write(controllerUser, statefulSet, statefulSets, sts, built.StatefulSet), tc.Policy, tc.Want)
			})
		}
	}
}

var (
	pdbs       = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")
	pdb        = policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget")
	pods       = corev1.SchemeGroupVersion.WithResource("pods")
	pod        = corev1.SchemeGroupVersion.WithKind("Pod")
	configMaps = corev1.SchemeGroupVersion.WithResource("configmaps")
	configMap  = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	events     = corev1.SchemeGroupVersion.WithResource("events")
	event      = corev1.SchemeGroupVersion.WithKind("Event")
	databases  = examplev1.SchemeGroupVersion.WithResource("databases")
	databaseK  = examplev1.SchemeGroupVersion.WithKind("Database")
)

// Load refuses a policy kube-apiserver would refuse or could not compile: a variable named
// by a CEL reserved word, an expression that does not parse.
func TestLoadRefusesPoliciesThatDoNotCompile(t *testing.T) {
	for name, tc := range map[string]struct{ variable, validation, want string }{
		"a reserved word":  {"namespace", "true", `variable "namespace": not a CEL identifier`},
		"a syntax error":   {"fine", "object.spec ==", "validation 0"},
		"an unknown macro": {"fine", "object.spec.exists_two(x, true)", "validation 0"},
	} {
		dir := t.TempDir()
		policy := `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: broken
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: [configmaps], operations: [CREATE]}
  variables:
  - {name: ` + tc.variable + `, expression: "1"}
  validations:
  - expression: "` + tc.validation + `"
`
		require.NoError(t, os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte(policy), 0o644))
		_, err := controllerpolicy.Load(dir)
		require.ErrorContains(t, err, tc.want, name)
	}
}
