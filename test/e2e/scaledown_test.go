//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// TestRealSynchronousScaleDownKeepsAcknowledgedCommits scales a Synchronous Database of each
// engine, on the real node, from 3 Pods to 2 while the replica it keeps is frozen, so that
// the replica it removes is the only one holding the rows acknowledged meanwhile. The
// scale-down waits: the replica to remove stops following the primary and the StatefulSet
// keeps 3 Pods, until the kept replica, thawed, holds those rows. Then the primary is frozen
// and failed over: the replica promoted has every acknowledged row.
func TestRealSynchronousScaleDownKeepsAcknowledgedCommits(t *testing.T) {
	requireRealNode(t)
	pg, my := realNodeImage(t, examplev1.EnginePostgreSQL), realNodeImage(t, examplev1.EngineMySQL)
	for _, e := range []struct {
		engine  examplev1.Engine
		version string
		sqlAt   sqlAt
	}{{examplev1.EnginePostgreSQL, pg.Release, psqlAt}, {examplev1.EngineMySQL, my.Line, mysqlAt}} {
		t.Run(string(e.engine), func(t *testing.T) {
			t.Parallel()
			testSynchronousScaleDown(t, e.engine, e.version, e.sqlAt)
		})
	}
}

func testSynchronousScaleDown(t *testing.T, engine examplev1.Engine, version string, sqlAt sqlAt) {
	ns := restrictedNamespace(t, "e2e-scaledown-"+string(engine))
	const db = "ledger"
	kubectlIn(t, synchronousDatabase(ns, db, engine, version, 3), "apply", "-f", "-")
	waitReplicating(t, ns, db, db+"-0", 3)
	host := db + "." + ns + ".svc.cluster.local"
	phase, out := sqlAt(t, ns, "create", db, host, "CREATE TABLE entries (id int PRIMARY KEY);")
	require.Equal(t, corev1.PodSucceeded, phase, out)

	// The replica kept frozen: the rows are acknowledged once the one to remove has them.
	thawKept := freeze(t, ns, db+"-1")
	phase, out = sqlAt(t, ns, "insert", db, host, "INSERT INTO entries VALUES (1), (2), (3), (4), (5);")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	kubectl(t, "patch", "db", db, "-n", ns, "--type=merge", "-p", `{"spec":{"replicas":2}}`)
	eventually(t, time.Minute, func() error {
		d, err := getDatabase(t, ns, db)
		if err != nil {
			return err
		}
		if i := slices.IndexFunc(d.Status.Members, func(m examplev1.DatabaseMember) bool { return m.Name == db+"-2" }); i < 0 || d.Status.Members[i].Streaming {
			return fmt.Errorf("%s-2 still follows the primary: %+v", db, d.Status.Members)
		}
		return nil
	})
	sts, err := kube(t).AppsV1().StatefulSets(ns).Get(context.Background(), db, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(3), ptr.Deref(sts.Spec.Replicas, 0), "%s-2 is kept while %s-1, frozen, lacks the rows it holds", db, db)

	thawKept()
	thawed := time.Now()
	eventually(t, 2*time.Minute, func() error {
		sts, err := kube(t).AppsV1().StatefulSets(ns).Get(context.Background(), db, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n := ptr.Deref(sts.Spec.Replicas, 0); n != 2 {
			return fmt.Errorf("the StatefulSet runs %d Pods", n)
		}
		return nil
	})
	t.Logf("measured: %s scaled down %v after the replica kept was thawed", engine, time.Since(thawed).Round(time.Second))
	events := kubectl(t, "get", "events", "-n", ns, "--field-selector", "reason=Updated", "-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}")
	require.Contains(t, events, "Scaling down: every transaction of "+db+"-2, stopped from following the primary, is on a replica kept")

	// The primary frozen: the one replica left is promoted, with every acknowledged row.
	freeze(t, ns, db+"-0")
	eventually(t, 3*time.Minute, func() error {
		d, err := getDatabase(t, ns, db)
		if err != nil {
			return err
		}
		if d.Status.Primary != db+"-1" {
			return fmt.Errorf("status.primary is %q; status.failover %+v", d.Status.Primary, d.Status.Failover)
		}
		return nil
	})
	// Through the client Service once it routes to the promoted replica: every row.
	waitAnswer(t, sqlAt, ns, "count", db, host, "SELECT count(*) FROM entries;", "5")
}
