package specs_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/names"
)

func TestNetworkPolicyAdmitsTheNamedClientsTheMembersAndTheController(t *testing.T) {
	for _, tc := range []struct {
		engine examplev1.Engine
		port   int32
	}{
		{examplev1.EnginePostgreSQL, 5432},
		{examplev1.EngineMySQL, 3306},
		{examplev1.EngineMongoDB, 27017},
	} {
		t.Run(string(tc.engine), func(t *testing.T) {
			db := database(3)
			db.Spec.Engine, db.Spec.Version = tc.engine, map[examplev1.Engine]string{
				examplev1.EnginePostgreSQL: "14.5", examplev1.EngineMySQL: "8.4", examplev1.EngineMongoDB: "7.0"}[tc.engine]
			clients := examplev1.DatabaseNetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}}
			other := examplev1.DatabaseNetworkPolicyPeer{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}},
				PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"api"}}}},
			}
			db.Spec.NetworkPolicy = &examplev1.DatabaseNetworkPolicy{From: []examplev1.DatabaseNetworkPolicyPeer{clients, other}}
			d, err := specs.Resolve(db)
			require.NoError(t, err)

			np := specs.NetworkPolicy(db, d, "database-system")
			require.Equal(t, "my-database", np.Name)
			require.Equal(t, "production", np.Namespace)
			require.Equal(t, []metav1.OwnerReference{specs.OwnerReference(db)}, np.OwnerReferences)
			require.Equal(t, names.ManagedByValue, np.Labels[names.ManagedByLabel])
			pods := metav1.LabelSelector{MatchLabels: names.SelectorLabels(db)}
			require.Equal(t, pods, np.Spec.PodSelector)
			require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes, "egress is left alone")
			ports := []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(tc.port))}}
			require.Equal(t, []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{
					{PodSelector: clients.PodSelector},
					{NamespaceSelector: other.NamespaceSelector, PodSelector: other.PodSelector},
				},
				Ports: ports,
			}, {
				From: []networkingv1.NetworkPolicyPeer{
					{PodSelector: &pods},
					{
						NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "database-system"}},
						PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/component": "controller"}},
					},
				},
				Ports: ports,
			}}, np.Spec.Ingress)

			// The policy shares no selector with the Database: editing one leaves the other.
			np.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app"] = "changed"
			require.Equal(t, "shop", db.Spec.NetworkPolicy.From[0].PodSelector.MatchLabels["app"])
		})
	}
}

func TestNetworkPolicyWithoutClientsAdmitsOnlyTheMembersAndTheController(t *testing.T) {
	db := database(1)
	db.Spec.NetworkPolicy = &examplev1.DatabaseNetworkPolicy{}
	d, err := specs.Resolve(db)
	require.NoError(t, err)
	np := specs.NetworkPolicy(db, d, "ops")
	// A rule without peers would admit every source, so an empty from has no client rule.
	require.Len(t, np.Spec.Ingress, 1)
	require.Len(t, np.Spec.Ingress[0].From, 2)
	require.Equal(t, "ops", np.Spec.Ingress[0].From[1].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
	for _, rule := range np.Spec.Ingress {
		require.NotEmpty(t, rule.From)
		require.NotEmpty(t, rule.Ports)
	}
}

func TestSyncNetworkPolicyOwnsTheWholeSpec(t *testing.T) {
	db := database(1)
	db.Spec.NetworkPolicy = &examplev1.DatabaseNetworkPolicy{}
	d, err := specs.Resolve(db)
	require.NoError(t, err)
	want := specs.NetworkPolicy(db, d, "database-system")
	have := want.DeepCopy()
	have.Labels["extra"] = "kept"
	have.Spec.PolicyTypes = append(have.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
	have.Spec.Ingress = append(have.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
	specs.SyncNetworkPolicy(have, want)
	require.Equal(t, want.Spec, have.Spec)
	require.Equal(t, "kept", have.Labels["extra"])
}
