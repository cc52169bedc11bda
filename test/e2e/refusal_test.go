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
)

// TestRefusedPodsReachStatus: a ResourceQuota of no Pods makes every Pod creation of the
// StatefulSet controller fail, which it reports only in Events on the StatefulSet. The
// Database says so (phase Failed; Ready False, reason FailedCreate, with the quota's refusal;
// one Warning Event of its own) instead of Provisioning forever, and becomes Ready once the
// quota is gone.
func TestRefusedPodsReachStatus(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "e2e-pod-quota")
	zeroQuota(t, ns, "no-pods", corev1.ResourcePods)
	kubectlIn(t, databaseIn(ns, "refused", 1, ""), "apply", "-f", "-")

	db := waitCondition(t, ns, "refused", "Ready", "FailedCreate")
	require.Equal(t, examplev1.DatabasePhaseFailed, db.Status.Phase)
	require.Zero(t, db.Status.ReadyReplicas)
	ready := meta.FindStatusCondition(db.Status.Conditions, "Ready")
	require.Equal(t, metav1.ConditionFalse, ready.Status)
	require.Contains(t, ready.Message, "exceeded quota")
	require.Contains(t, ready.Message, `pods "refused-0" is forbidden`)
	for typ, status := range map[string]metav1.ConditionStatus{"Progressing": metav1.ConditionFalse, "Degraded": metav1.ConditionTrue} {
		c := meta.FindStatusCondition(db.Status.Conditions, typ)
		require.NotNil(t, c, typ)
		require.Equal(t, status, c.Status, typ)
		require.Equal(t, "FailedCreate", c.Reason, typ)
	}
	eventually(t, 30*time.Second, func() error {
		events, err := kube(t).CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Database,involvedObject.name=refused,reason=FailedCreate"})
		if err != nil {
			return err
		}
		if len(events.Items) != 1 || events.Items[0].Type != corev1.EventTypeWarning || events.Items[0].Count != 1 {
			return fmt.Errorf("want one Warning FailedCreate Event on the Database, recorded once: %+v", events.Items)
		}
		return nil
	})

	// The StatefulSet controller's next attempt, after its backoff, creates the Pod.
	require.NoError(t, kube(t).CoreV1().ResourceQuotas(ns).Delete(ctx, "no-pods", metav1.DeleteOptions{}))
	db = waitReady(t, ns, "refused", 1)
	require.Equal(t, "AsExpected", meta.FindStatusCondition(db.Status.Conditions, "Degraded").Reason)
}
