//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	dbcontroller "example.com/database-apiserver/pkg/controller/database"
)

// noSuchNodeLabel is the node selector unplaceablePolicy gives Pods: no node has the label.
const noSuchNodeLabel = "e2e.example.com/no-such-node"

// unplaceablePolicy is a MutatingAdmissionPolicy, bound to the namespace ns only, that gives
// every Pod created there the node selector noSuchNodeLabel=true: the scheduler refuses it
// on the simulated node (no such label) and on the real node (its taint, too), and the
// controller's Pod recipe is what it is everywhere else.
func unplaceablePolicy(ns string) string {
	return `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: ` + ns + `
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["pods"]
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >-
        (has(object.spec.nodeSelector) ? [] : [JSONPatch{op: "add", path: "/spec/nodeSelector", value: {}}]) +
        [JSONPatch{op: "add", path: "/spec/nodeSelector/" + jsonpatch.escapeKey("` + noSuchNodeLabel + `"), value: "true"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: ` + ns + `
spec:
  policyName: ` + ns + `
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: ` + ns + `
`
}

// waitPodPolicy waits until kube-apiserver, which loads admission policies asynchronously,
// applies unplaceablePolicy to the Pods of ns (inForce) or no longer does: a dry-run create of
// a Pod there comes back with noSuchNodeLabel in its node selector, or without.
func waitPodPolicy(t *testing.T, ns string, inForce bool) {
	t.Helper()
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "policy-probe"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.invalid/probe"}}},
	}
	eventually(t, time.Minute, func() error {
		got, err := kube(t).CoreV1().Pods(ns).Create(context.Background(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		if _, ok := got.Spec.NodeSelector[noSuchNodeLabel]; ok != inForce {
			return fmt.Errorf("a Pod created in %s has node selector %v; want the policy in force: %t", ns, got.Spec.NodeSelector, inForce)
		}
		return nil
	})
}

// TestUnschedulablePodsReachStatus: the Pod of a Database that no node accepts stays Pending,
// with the scheduler's reason in its PodScheduled condition. Once it has been so for the
// controller's grace (UnschedulableAfter), the Database says so (phase Failed; Ready False, reason
// Unschedulable, naming the Pod with the scheduler's message; one Warning Event of its own;
// kubectl database describe shows it) instead of Provisioning forever, and becomes Ready once
// the Pod, created again without the node selector, is placed.
func TestUnschedulablePodsReachStatus(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "e2e-unschedulable")
	kubectlIn(t, unplaceablePolicy(ns), "apply", "-f", "-")
	removePolicy := func() {
		kubectlAs(cluster.KubeconfigPath, "", "delete", "mutatingadmissionpolicybinding,mutatingadmissionpolicy", ns, "--ignore-not-found")
	}
	t.Cleanup(removePolicy)
	waitPodPolicy(t, ns, true)
	kubectlIn(t, databaseIn(ns, "unplaced", 1, ""), "apply", "-f", "-")

	var db *examplev1.Database
	eventually(t, readyTimeout, func() error {
		var err error
		if db, err = getDatabase(t, ns, "unplaced"); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(db.Status.Conditions, "Ready"); c == nil || c.Reason != "Unschedulable" {
			return fmt.Errorf("condition Ready is %+v, want reason Unschedulable", c)
		}
		return nil
	})
	pod, err := kube(t).CoreV1().Pods(ns).Get(ctx, "unplaced-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, pod.Spec.NodeName)
	var scheduled *corev1.PodCondition
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodScheduled {
			scheduled = &pod.Status.Conditions[i]
		}
	}
	require.NotNil(t, scheduled)
	require.Equal(t, corev1.ConditionFalse, scheduled.Status)
	require.Equal(t, corev1.PodReasonUnschedulable, scheduled.Reason)

	require.Equal(t, examplev1.DatabasePhaseFailed, db.Status.Phase)
	require.Zero(t, db.Status.ReadyReplicas)
	ready := meta.FindStatusCondition(db.Status.Conditions, "Ready")
	require.Equal(t, metav1.ConditionFalse, ready.Status)
	require.Contains(t, ready.Message, "Pod unplaced-0 cannot be scheduled: ")
	require.Contains(t, ready.Message, "didn't match Pod's node affinity/selector")
	for typ, status := range map[string]metav1.ConditionStatus{"Progressing": metav1.ConditionFalse, "Degraded": metav1.ConditionTrue} {
		c := meta.FindStatusCondition(db.Status.Conditions, typ)
		require.NotNil(t, c, typ)
		require.Equal(t, status, c.Status, typ)
		require.Equal(t, "Unschedulable", c.Reason, typ)
		require.Equal(t, ready.Message, c.Message, typ)
	}
	// Ready was False from the start; Degraded turned True when the Database reported it.
	degraded := meta.FindStatusCondition(db.Status.Conditions, "Degraded")
	require.False(t, degraded.LastTransitionTime.Time.Before(scheduled.LastTransitionTime.Add(dbcontroller.UnschedulableAfter)),
		"reported after the grace: Pod unschedulable since %s, Database Degraded since %s", scheduled.LastTransitionTime, degraded.LastTransitionTime)
	t.Logf("measured: Pod unschedulable since %s, Database Degraded Unschedulable at %s (%s later): %s",
		scheduled.LastTransitionTime.UTC().Format(time.RFC3339), degraded.LastTransitionTime.UTC().Format(time.RFC3339),
		degraded.LastTransitionTime.Sub(scheduled.LastTransitionTime.Time), ready.Message)

	eventually(t, 30*time.Second, func() error {
		events, err := kube(t).CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Database,involvedObject.name=unplaced,reason=Unschedulable"})
		if err != nil {
			return err
		}
		if len(events.Items) != 1 || events.Items[0].Type != corev1.EventTypeWarning || events.Items[0].Count != 1 {
			return fmt.Errorf("want one Warning Unschedulable Event on the Database, recorded once: %+v", events.Items)
		}
		return nil
	})

	out, errOut, err := kubectlDatabase(t, "describe", "unplaced", "-n", ns)
	require.NoError(t, err, errOut)
	require.Contains(t, out, "Unschedulable")
	require.Contains(t, out, "Pod unplaced-0 cannot be scheduled: ")

	// The policy goes; the Pod's node selector cannot change, so it is deleted and the
	// StatefulSet controller creates it again, placed on the simulated node.
	removePolicy()
	waitPodPolicy(t, ns, false)
	require.NoError(t, kube(t).CoreV1().Pods(ns).Delete(ctx, "unplaced-0", metav1.DeleteOptions{}))
	db = waitReady(t, ns, "unplaced", 1)
	require.Equal(t, "AsExpected", meta.FindStatusCondition(db.Status.Conditions, "Degraded").Reason)
}
