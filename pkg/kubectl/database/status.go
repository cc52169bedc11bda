package database

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/names"
)

const statusExample = `  # Is my-database healthy, and if not, what is wrong?
  kubectl database status my-database -n production`

// StatusOptions are the inputs of `kubectl database status NAME`.
type StatusOptions struct {
	databaseOptions
	now func() time.Time
}

func newCmdStatus(f *factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &StatusOptions{databaseOptions: databaseOptions{IOStreams: streams}, now: f.now}
	return databaseCommand("status NAME", "Show on one screen whether a Database is healthy and what is wrong",
		"Show what an on-call looks at first: the Database's state, its primary and whether it takes writes, each member's role, readiness, streaming and lag, its volumes, its backups (the store, the schedule, the last success and failure, the Job running), what is under way (a failover, a switchover, a restart), and every condition that is not as it should be, with its reason and message.",
		statusExample, func(args []string) error { return o.complete(f, args) }, o.Run)
}

// healthyStatus is the status each condition type has when all is well; a condition in any
// other status is a problem status shows. Other condition types (Progressing) say what is
// under way, not what is wrong.
var healthyStatus = map[string]metav1.ConditionStatus{
	"Ready":       metav1.ConditionTrue,
	"Degraded":    metav1.ConditionFalse,
	"Replicating": metav1.ConditionTrue,
	"BackedUp":    metav1.ConditionTrue,
	"Restored":    metav1.ConditionTrue,
}

// Run reads the Database (an error when that fails) and its claims (shown as "<error: ...>"
// in their place when they cannot be read).
func (o *StatusOptions) Run(ctx context.Context) error {
	db, err := o.db.ExampleV1().Databases(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if err != nil {
		return onRequest(err, "get", "databases", o.Namespace)
	}
	w := newPrefixWriter(o.Out)
	replicas := int32(1)
	if db.Spec.Replicas != nil {
		replicas = *db.Spec.Replicas
	}
	w.Write(0, "Database:\t%s/%s: %s %s, %d/%d ready, %s\n", db.Namespace, db.Name, string(db.Spec.Engine), db.Spec.Version,
		db.Status.ReadyReplicas, replicas, orNone(string(db.Status.Phase)))
	switch {
	case db.Status.Primary == "":
		w.Write(0, "Primary:\t<none>\n")
	case db.Status.PrimaryLastWritableTime != nil:
		t := db.Status.PrimaryLastWritableTime.Time
		w.Write(0, "Primary:\t%s, taking no writes since %s (%s ago)\n", db.Status.Primary, t.UTC().Format(time.RFC3339), o.age(t))
	case examplev1.PrimaryTakesWrites(db):
		w.Write(0, "Primary:\t%s, taking writes\n", db.Status.Primary)
	default:
		w.Write(0, "Primary:\t%s, not seen taking writes: its server has not answered as the primary yet\n", db.Status.Primary)
	}
	if t := db.Status.LastFailoverTime; t != nil {
		w.Write(0, "Last Failover:\t%s (%s ago)\n", t.UTC().Format(time.RFC3339), o.age(t.Time))
	}
	writeMembers(w, db)
	o.writeVolumes(ctx, w, db)
	o.writeBackups(ctx, w, db)
	writeUnderWay(w, db)
	// The problems' columns are their own, not the tables' above.
	if err := w.Flush(); err != nil {
		return err
	}

	var problems [][3]string
	for _, c := range db.Status.Conditions {
		if want, ok := healthyStatus[c.Type]; ok && c.Status != want {
			problems = append(problems, [3]string{c.Type + "=" + string(c.Status), c.Reason, c.Message})
		}
	}
	if db.Status.ObservedGeneration < db.Generation {
		problems = append(problems, [3]string{"Generation", "NotObserved",
			"the controller has not yet acted on the latest spec"})
	}
	if len(problems) == 0 {
		w.Write(0, "Problems:\t<none>\n")
	} else {
		w.Write(0, "Problems:\n")
		for _, p := range problems {
			w.Write(1, "%s\t%s\t%s\n", p[0], p[1], p[2])
		}
	}
	return w.Flush()
}

// writeVolumes writes db's data claims: their phase and capacity, and for a claim of an ordinal
// at or past spec.replicas that no Pod mounts: a scale-down keeps it, as a StatefulSet does, and
// a scale-up mounts it again (its claim is "data-<name>-<ordinal>").
func (o *StatusOptions) writeVolumes(ctx context.Context, w *prefixWriter, db *examplev1.Database) {
	claims, err := o.kube.CoreV1().PersistentVolumeClaims(db.Namespace).List(ctx, metav1.ListOptions{LabelSelector: names.PodSelector(db)})
	switch {
	case err != nil:
		w.Write(0, "Volumes:\t%s\n", childError(err))
		return
	case len(claims.Items) == 0:
		w.Write(0, "Volumes:\t<none>\n")
		return
	}
	slices.SortFunc(claims.Items, func(a, b corev1.PersistentVolumeClaim) int { return strings.Compare(a.Name, b.Name) })
	w.Write(0, "Volumes:\n")
	for _, c := range claims.Items {
		capacity := "-"
		if q, ok := c.Status.Capacity[corev1.ResourceStorage]; ok {
			capacity = q.String()
		}
		if ordinal, ok := names.DataClaimOrdinal(db, c.Name); ok && db.Spec.Replicas != nil && ordinal >= *db.Spec.Replicas {
			w.Write(1, "%s\t%s\t%s\tnot in use (kept from a scale-down)\n", c.Name, string(c.Status.Phase), capacity)
			continue
		}
		w.Write(1, "%s\t%s\t%s\n", c.Name, string(c.Status.Phase), capacity)
	}
}

// writeBackups writes what status.backup says of a Database with spec.backup: the last backup
// that succeeded, the recoverability window (status.backup.firstRecoverableTime to
// lastArchivedTime), the last that failed, and the one running; and what the store holds of
// it now (databasebackups, which the API server reads from the store): how many backups,
// the oldest's and the newest's ends, or why it could not be read.
func (o *StatusOptions) writeBackups(ctx context.Context, w *prefixWriter, db *examplev1.Database) {
	if db.Spec.Backup == nil {
		return
	}
	b := db.Status.Backup
	if b == nil {
		b = &examplev1.DatabaseBackupStatus{}
	}
	schedule := db.Spec.Backup.Schedule
	if schedule == "" {
		schedule = "no schedule"
	}
	w.Write(0, "Backups:\tto %s, bucket %s (%s)\n", db.Spec.Backup.S3.Endpoint, db.Spec.Backup.S3.Bucket, schedule)
	when := func(t *metav1.Time, job string) string {
		if t == nil {
			return "<none>"
		}
		return fmt.Sprintf("%s (%s ago), Job %s", t.UTC().Format(time.RFC3339), o.age(t.Time), job)
	}
	w.Write(1, "Last Success:\t%s\n", when(b.LastSuccessfulTime, b.LastSuccessfulJob))
	if b.FirstRecoverableTime != nil {
		to := "<nothing archived yet>"
		if b.LastArchivedTime != nil {
			to = b.LastArchivedTime.UTC().Format(time.RFC3339) + " (last archived)"
		}
		w.Write(1, "Recoverable:\tfrom %s to %s\n", b.FirstRecoverableTime.UTC().Format(time.RFC3339), to)
	}
	if b.LastFailureTime != nil {
		w.Write(1, "Last Failure:\t%s\n", when(b.LastFailureTime, b.LastFailedJob))
	}
	if b.ActiveJob != "" {
		w.Write(1, "Running:\tJob %s\n", b.ActiveJob)
	}
	stored, err := o.db.ExampleV1().DatabaseBackups(db.Namespace).List(ctx, metav1.ListOptions{FieldSelector: examplev1.FieldDatabase + "=" + db.Name})
	switch {
	case err != nil:
		w.Write(1, "In Store:\t%s\n", childError(err))
	case len(stored.Items) == 0:
		w.Write(1, "In Store:\t<none>\n")
	default:
		ends := make([]time.Time, len(stored.Items))
		for i, item := range stored.Items {
			ends[i] = item.EndTime.Time
		}
		w.Write(1, "In Store:\t%d backups, ended from %s to %s\n", len(ends),
			slices.MinFunc(ends, time.Time.Compare).UTC().Format(time.RFC3339), slices.MaxFunc(ends, time.Time.Compare).UTC().Format(time.RFC3339))
	}
}

// writeUnderWay writes the failover, switchover or restart under way, if any.
func writeUnderWay(w *prefixWriter, db *examplev1.Database) {
	var lines []string
	if f := db.Status.Failover; f != nil {
		lines = append(lines, "failover from "+f.From+" to "+orNone(f.To)+": "+string(f.Phase))
	}
	if sp := db.Status.SwitchoverProgress; sp != nil {
		lines = append(lines, "switchover from "+sp.From+" to "+sp.To+": "+string(sp.Step))
	}
	if r := db.Status.Restart; r != nil && r.CompletedAt == nil {
		lines = append(lines, "rolling restart requested by "+r.RequestedBy)
	}
	if len(lines) == 0 {
		return
	}
	w.Write(0, "Under Way:\n")
	for _, l := range lines {
		w.Write(1, "%s\n", l)
	}
}

func (o *StatusOptions) age(t time.Time) string { return age(o.now, t) }
