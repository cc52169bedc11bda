//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/database-apiserver/internal/localcluster"
)

// TestNetworkPolicyOfADatabaseFollowsItsSpec applies a Database with spec.networkPolicy with
// kubectl and requires the controller's NetworkPolicy: the Database's Pods isolated for
// ingress, its port open to the named clients, its own Pods and the controller's only; then
// follows an edit of the clients and the removal of the field. No network plugin of the local
// cluster enforces NetworkPolicies, so this pins what is written, not the traffic.
func TestNetworkPolicyOfADatabaseFollowsItsSpec(t *testing.T) {
	ns := testNamespace(t, "e2e-netpol")
	manifest := func(from string) string {
		return `apiVersion: example.com/v1
kind: Database
metadata:
  name: guarded
  namespace: ` + ns + `
spec:
  engine: postgresql
  version: "16"
  replicas: 2
  storage: 1Gi
  networkPolicy:
    from:` + from + `
`
	}
	kubectlIn(t, manifest(`
    - podSelector: {matchLabels: {app: shop}}
    - namespaceSelector: {matchLabels: {team: payments}}
      podSelector: {matchExpressions: [{key: tier, operator: In, values: [api]}]}`), "apply", "-f", "-")

	k := kube(t)
	var np *networkingv1.NetworkPolicy
	eventually(t, time.Minute, func() error {
		var err error
		np, err = k.NetworkingV1().NetworkPolicies(ns).Get(context.Background(), "guarded", metav1.GetOptions{})
		return err
	})
	require.Len(t, np.OwnerReferences, 1)
	require.Equal(t, "Database", np.OwnerReferences[0].Kind)
	require.Equal(t, map[string]string{"app.kubernetes.io/name": "postgresql", "app.kubernetes.io/instance": "guarded",
		"app.kubernetes.io/managed-by": "database-controller"}, np.Spec.PodSelector.MatchLabels)
	require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes)
	require.Len(t, np.Spec.Ingress, 2)
	for _, rule := range np.Spec.Ingress {
		require.Len(t, rule.Ports, 1)
		require.Equal(t, int32(5432), rule.Ports[0].Port.IntVal)
	}
	require.Equal(t, "shop", np.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app"])
	require.Equal(t, "payments", np.Spec.Ingress[0].From[1].NamespaceSelector.MatchLabels["team"])
	require.Equal(t, np.Spec.PodSelector, *np.Spec.Ingress[1].From[0].PodSelector, "the members reach each other")
	require.Equal(t, localcluster.APIServerNamespace, np.Spec.Ingress[1].From[1].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
	require.Equal(t, map[string]string{"app.kubernetes.io/component": "controller"}, np.Spec.Ingress[1].From[1].PodSelector.MatchLabels)
	t.Logf("kubectl get networkpolicy:\n%s", kubectl(t, "get", "networkpolicy", "-n", ns, "guarded"))
	t.Logf("kubectl describe networkpolicy:\n%s", kubectl(t, "describe", "networkpolicy", "-n", ns, "guarded"))

	// Other clients.
	kubectlIn(t, manifest(`
    - podSelector: {matchLabels: {app: reports}}`), "apply", "-f", "-")
	eventually(t, time.Minute, func() error {
		np, err := k.NetworkingV1().NetworkPolicies(ns).Get(context.Background(), "guarded", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := np.Spec.Ingress[0].From; len(got) != 1 || got[0].PodSelector.MatchLabels["app"] != "reports" {
			b, _ := json.Marshal(got)
			return fmt.Errorf("clients are %s", b)
		}
		return nil
	})

	// The field removed: the NetworkPolicy goes.
	kubectl(t, "patch", "db", "guarded", "-n", ns, "--type=json", `-p=[{"op": "remove", "path": "/spec/networkPolicy"}]`)
	eventually(t, time.Minute, func() error {
		_, err := k.NetworkingV1().NetworkPolicies(ns).Get(context.Background(), "guarded", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("NetworkPolicy still there: %v", err)
	})
}

// TestInvalidNetworkPolicyIsRefusedWithFieldPath: a peer without a selector and a selector
// kube-apiserver would refuse are 422s naming the field, and nothing is created.
func TestInvalidNetworkPolicyIsRefusedWithFieldPath(t *testing.T) {
	ns := testNamespace(t, "e2e-bad-netpol")
	for _, tc := range []struct {
		name, from string
		want       []string
	}{
		{"a peer without a selector", `[{}]`, []string{"spec.networkPolicy.from[0]", "must set podSelector, namespaceSelector or both"}},
		{"a bad operator", `[{podSelector: {matchExpressions: [{key: tier, operator: Like}]}}]`,
			[]string{"spec.networkPolicy.from[0].podSelector.matchExpressions[0].operator", `"Like"`}},
		{"an ipBlock", `[{ipBlock: {cidr: 0.0.0.0/0}}]`, []string{`unknown field "spec.networkPolicy.from[0].ipBlock"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errOut := kubectlFails(t, cluster.KubeconfigPath, `apiVersion: example.com/v1
kind: Database
metadata:
  name: e2e-bad-netpol
  namespace: `+ns+`
spec:
  engine: postgresql
  version: "16"
  replicas: 1
  storage: 1Gi
  networkPolicy:
    from: `+tc.from+`
`, "apply", "-f", "-")
			for _, w := range tc.want {
				require.Contains(t, errOut, w)
			}
			_, _, err := kubectlAs(cluster.KubeconfigPath, "", "get", "db", "-n", ns, "e2e-bad-netpol")
			require.Error(t, err, "nothing is created")
		})
	}
}
