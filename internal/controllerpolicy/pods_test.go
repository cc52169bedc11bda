package controllerpolicy_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
	"example.com/database-apiserver/pkg/controller/specs"
)

// The controller's PodDisruptionBudget is admitted; one that selects other Pods, or lets
// fewer or more of them go than one at a time, is refused.
func TestPodDisruptionBudgetsSelectOnlyTheirDatabasesPods(t *testing.T) {
	policies := loadPolicies(t)
	for _, e := range engines {
		built, err := specs.NewChildren(database(e, catalog.Lines(e)[0], 3), "password", "database-system")
		require.NoError(t, err)
		require.Empty(t, denials(t, policies, write(controllerUser, pdb, pdbs, built.PodDisruptionBudget, nil)), e)
		require.Empty(t, denials(t, policies, write(controllerUser, pdb, pdbs, built.PodDisruptionBudget, built.PodDisruptionBudget)), e)
	}
	built, err := specs.NewChildren(database(examplev1.EnginePostgreSQL, "16", 3), "password", "database-system")
	require.NoError(t, err)
	const selects = "its selector must be exactly the matchLabels"
	for _, tc := range []struct {
		name   string
		change func(*policyv1.PodDisruptionBudget)
		want   string
	}{
		{"selecting every Pod", func(b *policyv1.PodDisruptionBudget) { b.Spec.Selector = &metav1.LabelSelector{} }, selects},
		{"selecting another Database's Pods", func(b *policyv1.PodDisruptionBudget) {
			b.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] = "other"
		}, selects},
		{"selecting by an expression too", func(b *policyv1.PodDisruptionBudget) {
			b.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}
		}, selects},
		{"selecting a subset", func(b *policyv1.PodDisruptionBudget) {
			b.Spec.Selector.MatchLabels["database.example.com/role"] = "primary"
		}, selects},
		{"of maxUnavailable 0", func(b *policyv1.PodDisruptionBudget) { b.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0)) },
			"it must set maxUnavailable 1 and no minAvailable"},
		{"of minAvailable 100%", func(b *policyv1.PodDisruptionBudget) {
			b.Spec.MaxUnavailable, b.Spec.MinAvailable = nil, ptr.To(intstr.FromString("100%"))
		}, "it must set maxUnavailable 1 and no minAvailable"},
		{"of another name", func(b *policyv1.PodDisruptionBudget) { b.Name = "my-database-2" }, "its name must be its controller Database's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := built.PodDisruptionBudget.DeepCopy()
			tc.change(b)
			for _, old := range []k8sruntime.Object{nil, built.PodDisruptionBudget} {
				requireDenied(t, policies, write(controllerUser, pdb, pdbs, b, old), "database-controller-poddisruptionbudgets", tc.want)
			}
		})
	}
}

// databasePod is the Pod of ordinal 0 of the Database's StatefulSet sts, as the StatefulSet
// controller makes it: the template's labels and its own, owned by the StatefulSet.
func databasePod(sts *appsv1.StatefulSet) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: *sts.Spec.Template.ObjectMeta.DeepCopy(), Spec: *sts.Spec.Template.Spec.DeepCopy()}
	p.Name, p.Namespace, p.UID = sts.Name+"-0", sts.Namespace, "7f0c6c39-1f4e-4c59-a3ad-38d1d1c3a7a2"
	p.Labels["controller-revision-hash"] = sts.Name + "-5d8f7c9b6"
	p.Labels["statefulset.kubernetes.io/pod-name"] = p.Name
	p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(sts, statefulSet)}
	return p
}

// The controller sets, changes and removes a Pod's role label; any other change of its
// metadata is refused.
func TestPodsChangeOnlyTheirRoleLabel(t *testing.T) {
	policies := loadPolicies(t)
	built, err := specs.NewChildren(database(examplev1.EnginePostgreSQL, "16", 3), "password", "database-system")
	require.NoError(t, err)
	old := databasePod(built.StatefulSet)
	withRole := func(p *corev1.Pod, role string) *corev1.Pod {
		p = p.DeepCopy()
		p.Labels[specs.RoleLabel] = role
		return p
	}
	primary := withRole(old, specs.RolePrimary)
	for name, tc := range map[string][2]*corev1.Pod{
		"set":     {old, primary},
		"changed": {primary, withRole(old, specs.RoleReplica)},
		"removed": {primary, old},
	} {
		require.Empty(t, denials(t, policies, write(controllerUser, pod, pods, tc[1], tc[0])), name)
	}
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
		want   string
	}{
		{"adding a tenant's label", func(p *corev1.Pod) { p.Labels["app"] = "frontend" },
			"it may change only the label database.example.com/role, not app"},
		{"adding an empty label", func(p *corev1.Pod) { p.Labels["app"] = "" },
			"it may change only the label database.example.com/role, not app"},
		{"changing the instance", func(p *corev1.Pod) { p.Labels["app.kubernetes.io/instance"] = "other" },
			"not app.kubernetes.io/instance"},
		{"removing a label", func(p *corev1.Pod) { delete(p.Labels, "statefulset.kubernetes.io/pod-name") },
			"not statefulset.kubernetes.io/pod-name"},
		{"setting another role", func(p *corev1.Pod) { p.Labels[specs.RoleLabel] = "leader" },
			"the label database.example.com/role may be only primary or replica"},
		{"dropping its owner", func(p *corev1.Pod) { p.OwnerReferences = nil },
			"it may not change its ownerReferences, annotations or finalizers"},
		{"annotating it", func(p *corev1.Pod) { p.Annotations = map[string]string{"prometheus.io/scrape": "true"} },
			"it may not change its ownerReferences, annotations or finalizers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := primary.DeepCopy()
			tc.change(p)
			requireDenied(t, policies, write(controllerUser, pod, pods, p, old), "database-controller-pods", tc.want)
		})
	}
}
