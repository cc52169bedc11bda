package database_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
)

// networkPolicy is the stored NetworkPolicy of the example Database.
func (f *fixture) networkPolicy() *networkingv1.NetworkPolicy {
	f.t.Helper()
	np, err := f.kube.Tracker().Get(networkPolicies, namespace, name)
	require.NoError(f.t, err)
	return np.(*networkingv1.NetworkPolicy)
}

func TestNetworkPolicyFollowsSpecNetworkPolicy(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	require.False(t, f.exists(networkPolicies, name), "no NetworkPolicy while spec.networkPolicy is unset")

	shop := examplev1.DatabaseNetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}}
	f.updateDatabase(func(db *examplev1.Database) {
		db.Spec.NetworkPolicy = &examplev1.DatabaseNetworkPolicy{From: []examplev1.DatabaseNetworkPolicyPeer{shop}}
	})
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{}, result)
	require.Equal(t, []string{"create networkpolicies my-database", "update databases/status my-database"}, f.actions)
	require.Equal(t, []string{"Normal Created Created NetworkPolicy my-database"}, f.events())
	np := f.networkPolicy()
	require.True(t, metav1.IsControlledBy(np, f.database()))
	require.Equal(t, shop.PodSelector, np.Spec.Ingress[0].From[0].PodSelector)
	require.Equal(t, database.DefaultControllerNamespace,
		np.Spec.Ingress[1].From[1].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"], "the controller is admitted from its own namespace")

	// A policy edited by hand is set back; an unchanged one is not written.
	np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
	require.NoError(t, f.kube.Tracker().Update(networkPolicies, np, namespace))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"update networkpolicies my-database"}, f.actions)
	require.Len(t, f.networkPolicy().Spec.Ingress, 2)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, f.actions)

	// Other clients: the policy follows.
	payments := examplev1.DatabaseNetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}}}
	f.updateDatabase(func(db *examplev1.Database) {
		db.Spec.NetworkPolicy = &examplev1.DatabaseNetworkPolicy{From: []examplev1.DatabaseNetworkPolicyPeer{payments}}
	})
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"update networkpolicies my-database", "update databases/status my-database"}, f.actions)
	require.Equal(t, []networkingv1.NetworkPolicyPeer{{NamespaceSelector: payments.NamespaceSelector}}, f.networkPolicy().Spec.Ingress[0].From)

	// Unset: ours is deleted.
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.NetworkPolicy = nil })
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"delete networkpolicies my-database", "update databases/status my-database"}, f.actions)
	require.Equal(t, []string{"Normal Deleted Deleted NetworkPolicy my-database: spec.networkPolicy is unset"}, f.events())
	require.False(t, f.exists(networkPolicies, name))
}

func TestAForeignNetworkPolicyOfTheNameIsAConflict(t *testing.T) {
	db := exampleDatabase()
	db.Spec.NetworkPolicy = &examplev1.DatabaseNetworkPolicy{}
	foreign := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	f := newFixture(t, db, foreign)
	_, err := f.reconcile()
	require.NoError(t, err)
	got := f.database()
	require.Equal(t, examplev1.DatabasePhaseFailed, got.Status.Phase)
	require.Equal(t, "ChildConflict", condition(got, "Ready").Reason)
	require.Contains(t, condition(got, "Ready").Message, "NetworkPolicy my-database")
	require.Empty(t, f.networkPolicy().OwnerReferences, "a foreign object is never adopted")
}

func TestNetworkPolicyComesBeforeEveryOtherChild(t *testing.T) {
	db := exampleDatabase()
	db.Spec.NetworkPolicy = &examplev1.DatabaseNetworkPolicy{}
	// A foreign PodDisruptionBudget of the Database's name halts the pass after the
	// StatefulSet: the NetworkPolicy is there before it all the same.
	foreign := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	f := newFixture(t, db, foreign)
	_, err := f.reconcile()
	require.NoError(t, err)
	// The finalizer first, then the NetworkPolicy before any other child.
	require.Equal(t, []string{"update databases my-database", "create networkpolicies my-database"}, f.actions[:2])
	require.Contains(t, f.actions, "create statefulsets my-database")
	require.True(t, f.exists(networkPolicies, name))
	require.Equal(t, "ChildConflict", condition(f.database(), "Ready").Reason)

	// While that conflict stays, a client removed from the spec is removed from the policy.
	shop := examplev1.DatabaseNetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}}
	f.updateDatabase(func(db *examplev1.Database) {
		db.Spec.NetworkPolicy = &examplev1.DatabaseNetworkPolicy{From: []examplev1.DatabaseNetworkPolicyPeer{shop}}
	})
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Len(t, f.networkPolicy().Spec.Ingress, 2)
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.NetworkPolicy = &examplev1.DatabaseNetworkPolicy{} })
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Len(t, f.networkPolicy().Spec.Ingress, 1, "only the members' and the controller's rule")
	require.Equal(t, "ChildConflict", condition(f.database(), "Ready").Reason)
}
