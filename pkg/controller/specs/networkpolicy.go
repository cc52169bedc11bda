package specs

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

// ControllerPodLabels are the labels of the controller's own Pods (artifacts/deploy), which a
// Database's NetworkPolicy admits from the controller's namespace: the controller connects to
// the servers to create users and to run and watch replication.
var ControllerPodLabels = map[string]string{componentLabel: "controller"}

// NetworkPolicyName is the NetworkPolicy's name: "<name>".
func NetworkPolicyName(db *examplev1.Database) string { return db.Name }

// NetworkPolicy is "<name>", for a Database with spec.networkPolicy set: it selects the
// Database's Pods, isolates them for ingress (policyTypes [Ingress]; egress is left alone)
// and admits, on the engine's port (d.Recipe.Port, TCP) only:
//   - the peers of spec.networkPolicy.from, as the user wrote them (a rule of its own, left
//     out when the list is empty: a rule without peers would admit every source);
//   - the Database's own Pods, which replicate from each other on that port;
//   - the Pods labelled ControllerPodLabels in controllerNamespace;
//
// and, with spec.backup (d.Backup), the Database's backup Jobs' Pods (BackupJobLabels) on the
// engine's backup port only (engine.Backups).
//
// Under networking.k8s.io/v1 semantics rules are allowed in union, so any other
// NetworkPolicy selecting the same Pods can only admit more.
func NetworkPolicy(db *examplev1.Database, d Desired, controllerNamespace string) *networkingv1.NetworkPolicy {
	ports := []networkingv1.NetworkPolicyPort{{
		Protocol: ptr.To(corev1.ProtocolTCP),
		Port:     ptr.To(intstr.FromInt32(d.Recipe.Port)),
	}}
	var rules []networkingv1.NetworkPolicyIngressRule
	if from := clientPeers(db.Spec.NetworkPolicy); len(from) > 0 {
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{From: from, Ports: ports})
	}
	rules = append(rules, networkingv1.NetworkPolicyIngressRule{
		From: []networkingv1.NetworkPolicyPeer{
			{PodSelector: &metav1.LabelSelector{MatchLabels: names.SelectorLabels(db)}},
			{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: controllerNamespace}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: ControllerPodLabels},
			},
		},
		Ports: ports,
	})
	if b, ok := d.Engine().(engine.Backups); ok && d.Backup != nil {
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{
			From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: BackupJobLabels(db)}}},
			Ports: []networkingv1.NetworkPolicyPort{{
				Protocol: ptr.To(corev1.ProtocolTCP),
				Port:     ptr.To(intstr.FromInt32(b.BackupPort())),
			}},
		})
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: objectMeta(db, NetworkPolicyName(db), ChildLabels(db)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: names.SelectorLabels(db)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     rules,
		},
	}
}

// clientPeers are policy's peers as NetworkPolicyPeers (nil for a nil policy), each selector
// copied so the NetworkPolicy shares no memory with the Database.
func clientPeers(policy *examplev1.DatabaseNetworkPolicy) []networkingv1.NetworkPolicyPeer {
	if policy == nil {
		return nil
	}
	peers := make([]networkingv1.NetworkPolicyPeer, 0, len(policy.From))
	for _, p := range policy.From {
		peers = append(peers, networkingv1.NetworkPolicyPeer{
			PodSelector:       p.PodSelector.DeepCopy(),
			NamespaceSelector: p.NamespaceSelector.DeepCopy(),
		})
	}
	return peers
}

// SyncNetworkPolicy copies our labels and the whole spec from want into have: every field of
// the spec is the controller's.
func SyncNetworkPolicy(have, want *networkingv1.NetworkPolicy) {
	have.Labels = MergeLabels(have.Labels, want.Labels)
	have.Spec = *want.Spec.DeepCopy()
}
