package database

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/names"
)

const describeExample = `  # Spec, phase, conditions, members, children and recent Events of my-database
  kubectl database describe my-database -n production`

// DescribeOptions are the inputs of `kubectl database describe NAME`.
type DescribeOptions struct {
	databaseOptions
	now func() time.Time
}

func newCmdDescribe(f *factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &DescribeOptions{databaseOptions: databaseOptions{IOStreams: streams}, now: f.now}
	return databaseCommand("describe NAME", "Show a Database with its conditions, members, children and Events",
		"Show a Database as kubectl describe does: its spec, phase and conditions, the primary and each member's role, readiness, streaming and lag, its StatefulSet, Services, credentials Secret (the name only, never its data) and PersistentVolumeClaims, and its recent Events.",
		describeExample, func(args []string) error { return o.complete(f, args) }, o.Run)
}

// Run reads the Database (an error when that fails) and then its children and Events, each
// shown as "<error: ...>" in its place when it cannot be read (a user may read Databases and
// not Events, say).
func (o *DescribeOptions) Run(ctx context.Context) error {
	db, err := o.db.ExampleV1().Databases(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if err != nil {
		return onRequest(err, "get", "databases", o.Namespace)
	}
	w := newPrefixWriter(o.Out)
	o.describeDatabase(w, db)
	o.describeChildren(ctx, w, db)
	o.describeEvents(ctx, w, db)
	return w.Flush()
}

func (o *DescribeOptions) describeDatabase(w *prefixWriter, db *examplev1.Database) {
	w.Write(0, "Name:\t%s\n", db.Name)
	w.Write(0, "Namespace:\t%s\n", db.Namespace)
	w.Write(0, "Created:\t%s (%s ago)\n", db.CreationTimestamp.UTC().Format(time.RFC1123Z), o.age(db.CreationTimestamp.Time))
	if db.DeletionTimestamp != nil {
		w.Write(0, "Deleting since:\t%s\n", db.DeletionTimestamp.UTC().Format(time.RFC1123Z))
	}
	w.Write(0, "Spec:\n")
	w.Write(1, "Engine:\t%s\n", db.Spec.Engine)
	w.Write(1, "Version:\t%s\n", db.Spec.Version)
	w.Write(1, "Replicas:\t%s\n", int32OrNone(db.Spec.Replicas))
	w.Write(1, "Storage:\t%s\n", orNone(db.Spec.Storage))
	w.Write(1, "Deletion Policy:\t%s\n", orNone(string(db.Spec.DeletionPolicy)))
	if db.Spec.Primary != "" && db.Spec.Primary != db.Status.Primary && examplev1.RequestedPrimary(db) == "" {
		w.Write(1, "Primary:\t%s (asked before the last failover; not acted on)\n", db.Spec.Primary)
	} else {
		w.Write(1, "Primary:\t%s\n", orNone(db.Spec.Primary))
	}
	w.Write(1, "Network Policy:\t%s\n", networkPolicyClients(db.Spec.NetworkPolicy))
	w.Write(1, "Failover:\t%s\n", orNone(string(db.Spec.Failover)))
	w.Write(1, "Failover Delay Seconds:\t%s\n", int32OrNone(db.Spec.FailoverDelaySeconds))
	w.Write(1, "Durability:\t%s\n", orNone(string(db.Spec.Durability)))
	w.Write(0, "Status:\n")
	w.Write(1, "Phase:\t%s\n", orNone(string(db.Status.Phase)))
	w.Write(1, "Ready Replicas:\t%d\n", db.Status.ReadyReplicas)
	w.Write(1, "Primary:\t%s\n", orNone(db.Status.Primary))
	w.Write(1, "Observed Generation:\t%d (generation %d)\n", db.Status.ObservedGeneration, db.Generation)
	if t := db.Status.PrimaryLastWritableTime; t != nil {
		w.Write(1, "Primary Last Writable:\t%s (%s ago)\n", t.UTC().Format(time.RFC1123Z), o.age(t.Time))
	}
	if t := db.Status.LastFailoverTime; t != nil {
		w.Write(1, "Last Failover:\t%s (%s ago)\n", t.UTC().Format(time.RFC1123Z), o.age(t.Time))
	}

	if r := db.Status.Restart; r != nil {
		w.Write(0, "Restart:\n")
		w.Write(1, "Requested By:\t%s\n", r.RequestedBy)
		w.Write(1, "Requested At:\t%s (%s ago)\n", r.RequestedAt.UTC().Format(time.RFC1123Z), o.age(r.RequestedAt.Time))
		w.Write(1, "Reason:\t%s\n", orNone(r.Reason))
		if r.CompletedAt != nil {
			w.Write(1, "Completed At:\t%s (%s ago)\n", r.CompletedAt.UTC().Format(time.RFC1123Z), o.age(r.CompletedAt.Time))
		} else {
			w.Write(1, "Completed At:\t<under way>\n")
		}
	}
	if s := db.Status.Switchover; s != nil {
		w.Write(0, "Switchover:\n")
		w.Write(1, "Target:\t%s\n", s.Target)
		w.Write(1, "Requested By:\t%s\n", s.RequestedBy)
		w.Write(1, "Requested At:\t%s (%s ago)\n", s.RequestedAt.UTC().Format(time.RFC1123Z), o.age(s.RequestedAt.Time))
	}
	if sp := db.Status.SwitchoverProgress; sp != nil {
		w.Write(0, "Switchover Progress:\n")
		w.Write(1, "From:\t%s\n", sp.From)
		w.Write(1, "To:\t%s\n", sp.To)
		w.Write(1, "Step:\t%s\n", sp.Step)
	}
	if f := db.Status.Failover; f != nil {
		w.Write(0, "Failover:\n")
		w.Write(1, "Phase:\t%s\n", f.Phase)
		w.Write(1, "From:\t%s\n", f.From)
		w.Write(1, "To:\t%s\n", orNone(f.To))
		w.Write(1, "Replicas Answering:\t%d (%d needed)\n", f.ReachableReplicas, f.NeededReplicas)
		w.Write(1, "Started:\t%s (%s ago)\n", f.StartTime.UTC().Format(time.RFC1123Z), o.age(f.StartTime.Time))
	}

	if len(db.Status.Conditions) == 0 {
		w.Write(0, "Conditions:\t<none>\n")
	} else {
		w.Write(0, "Conditions:\n")
		w.Write(1, "Type\tStatus\tReason\tAge\tMessage\n")
		w.Write(1, "----\t------\t------\t---\t-------\n")
		for _, c := range db.Status.Conditions {
			w.Write(1, "%s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, o.age(c.LastTransitionTime.Time), c.Message)
		}
	}

	writeMembers(w, db)
}

// writeMembers writes db's members as a table: each one's role, readiness, streaming (for a
// replica) and lag.
func writeMembers(w *prefixWriter, db *examplev1.Database) {
	if len(db.Status.Members) == 0 {
		w.Write(0, "Members:\t<none>\n")
		return
	}
	w.Write(0, "Members:\n")
	w.Write(1, "Name\tRole\tReady\tStreaming\tLag\n")
	w.Write(1, "----\t----\t-----\t---------\t---\n")
	for _, m := range db.Status.Members {
		streaming := "-"
		if m.Role == examplev1.MemberRoleReplica {
			streaming = strconv.FormatBool(m.Streaming)
		}
		// In bytes (PostgreSQL's WAL) and in seconds, each where the engine says it.
		var lag []string
		if m.LagBytes != nil {
			lag = append(lag, strconv.FormatInt(*m.LagBytes, 10)+" B")
		}
		if m.LagSeconds != nil {
			lag = append(lag, strconv.FormatInt(*m.LagSeconds, 10)+" s")
		}
		w.Write(1, "%s\t%s\t%t\t%s\t%s\n", m.Name, orNone(string(m.Role)), m.Ready, streaming, orDash(strings.Join(lag, ", ")))
	}
}

// describeChildren shows what the controller made for db, found by the names and labels it
// gives them (pkg/names).
func (o *DescribeOptions) describeChildren(ctx context.Context, w *prefixWriter, db *examplev1.Database) {
	selector := metav1.ListOptions{LabelSelector: names.PodSelector(db)}

	sts, err := o.kube.AppsV1().StatefulSets(db.Namespace).Get(ctx, names.StatefulSetName(db), metav1.GetOptions{})
	switch {
	case err != nil:
		w.Write(0, "StatefulSet:\t%s\n", childError(err))
	default:
		want := int32(1)
		if sts.Spec.Replicas != nil {
			want = *sts.Spec.Replicas
		}
		w.Write(0, "StatefulSet:\t%s (%d desired, %d ready, %d updated)\n", sts.Name, want, sts.Status.ReadyReplicas, sts.Status.UpdatedReplicas)
	}

	services, err := o.kube.CoreV1().Services(db.Namespace).List(ctx, selector)
	switch {
	case err != nil:
		w.Write(0, "Services:\t%s\n", childError(err))
	case len(services.Items) == 0:
		w.Write(0, "Services:\t<none>\n")
	default:
		w.Write(0, "Services:\n")
		w.Write(1, "Name\tType\tCluster IP\tPorts\n")
		w.Write(1, "----\t----\t----------\t-----\n")
		slices.SortFunc(services.Items, func(a, b corev1.Service) int { return strings.Compare(a.Name, b.Name) })
		for _, s := range services.Items {
			ports := make([]string, 0, len(s.Spec.Ports))
			for _, p := range s.Spec.Ports {
				ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
			}
			w.Write(1, "%s\t%s\t%s\t%s\n", s.Name, s.Spec.Type, orNone(s.Spec.ClusterIP), orNone(strings.Join(ports, ",")))
		}
	}

	// The Secret is named, never read: its data is the password, and describe must work for
	// a user who may not read Secrets.
	w.Write(0, "Secret:\t%s\n", names.SecretName(db))

	claims, err := o.kube.CoreV1().PersistentVolumeClaims(db.Namespace).List(ctx, selector)
	switch {
	case err != nil:
		w.Write(0, "PersistentVolumeClaims:\t%s\n", childError(err))
	case len(claims.Items) == 0:
		w.Write(0, "PersistentVolumeClaims:\t<none>\n")
	default:
		w.Write(0, "PersistentVolumeClaims:\n")
		w.Write(1, "Name\tStatus\tRequested\tCapacity\n")
		w.Write(1, "----\t------\t---------\t--------\n")
		slices.SortFunc(claims.Items, func(a, b corev1.PersistentVolumeClaim) int { return strings.Compare(a.Name, b.Name) })
		for _, c := range claims.Items {
			requested, capacity := "-", "-"
			if q, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
				requested = q.String()
			}
			if q, ok := c.Status.Capacity[corev1.ResourceStorage]; ok {
				capacity = q.String()
			}
			w.Write(1, "%s\t%s\t%s\t%s\n", c.Name, c.Status.Phase, requested, capacity)
		}
	}
}

// describeEvents shows the Events whose involvedObject is db, oldest first, as kubectl
// describe does.
func (o *DescribeOptions) describeEvents(ctx context.Context, w *prefixWriter, db *examplev1.Database) {
	selector := fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.kind", "Database"),
		fields.OneTermEqualSelector("involvedObject.name", db.Name),
		fields.OneTermEqualSelector("involvedObject.namespace", db.Namespace),
		fields.OneTermEqualSelector("involvedObject.uid", string(db.UID)),
	).String()
	events, err := o.kube.CoreV1().Events(db.Namespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
	switch {
	case err != nil:
		w.Write(0, "Events:\t%s\n", childError(err))
		return
	case len(events.Items) == 0:
		w.Write(0, "Events:\t<none>\n")
		return
	}
	slices.SortStableFunc(events.Items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	w.Write(0, "Events:\n")
	w.Write(1, "Type\tReason\tAge\tFrom\tMessage\n")
	w.Write(1, "----\t------\t---\t----\t-------\n")
	for _, e := range events.Items {
		age := o.age(eventTime(e))
		if e.Count > 1 {
			age = fmt.Sprintf("%s (x%d over %s)", age, e.Count, o.age(e.FirstTimestamp.Time))
		}
		from := e.Source.Component
		if from == "" {
			from = e.ReportingController
		}
		w.Write(1, "%s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, age, from, strings.TrimSpace(e.Message))
	}
}

// eventTime is when e last happened: lastTimestamp, else eventTime (events.k8s.io/v1
// writers), else its creation.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func (o *DescribeOptions) age(t time.Time) string { return age(o.now, t) }

// age is how long before now t was, as kubectl prints ages ("5m", "2d3h").
func age(now func() time.Time, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t))
}

// childError is how a child that could not be read is shown in its place.
func childError(err error) string {
	return "<error: " + err.Error() + ">"
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// orDash is s, or "-" for a table cell with nothing to say.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func int32OrNone(p *int32) string {
	if p == nil {
		return "<none>"
	}
	return strconv.FormatInt(int64(*p), 10)
}

// prefixWriter writes kubectl describe's layout: lines indented two spaces per level,
// tab-separated columns aligned by one tabwriter across the whole output.
type prefixWriter struct {
	tw *tabwriter.Writer
}

func newPrefixWriter(out io.Writer) *prefixWriter {
	return &prefixWriter{tw: tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)}
}

// Write writes format at indentation level. Every string argument is what the API server
// returned (names, reasons, messages, Events, errors) and is written through escapeText, so
// that only format lays out lines and columns.
func (w *prefixWriter) Write(level int, format string, a ...any) {
	args := make([]any, len(a))
	for i, arg := range a {
		if s, ok := arg.(string); ok {
			arg = escapeText(s)
		}
		args[i] = arg
	}
	fmt.Fprintf(w.tw, strings.Repeat("  ", level)+format, args...)
}

// escapeText returns s with every character unicode.IsPrint refuses written as a Go escape
// (a newline as \n, ESC as \x1b, a bidirectional override as \u202e) and each byte of
// invalid UTF-8 as \xNN: free text from the API server (a restart reason, a condition
// message, an Event) can then neither fake lines of the description, break its columns, nor
// send terminal escape sequences. cli-runtime's printers.EscapeTerminal replaces only ESC and
// carriage returns, which would leave newlines and tabs. Printable text, backslashes and
// quotes included, is written as it is.
func escapeText(s string) string {
	printable := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			printable = false
			break
		}
	}
	if printable {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			quoted := strconv.QuoteRune(r)
			b.WriteString(quoted[1 : len(quoted)-1])
		}
		i += size
	}
	return b.String()
}

// Flush writes what the tabwriter holds.
func (w *prefixWriter) Flush() error { return w.tw.Flush() }

// networkPolicyClients says whom spec.networkPolicy admits: "<none>" when it is unset (no
// NetworkPolicy), "no clients" for an empty list, else each peer with its selectors as
// metav1.FormatLabelSelector writes them ("pods app=shop in namespaces team=payments"), an
// empty selector, which selects everything, as "every pod" ("of its namespace" without a
// namespace selector) or "in every namespace"; peers are
// joined by "; ".
func networkPolicyClients(policy *examplev1.DatabaseNetworkPolicy) string {
	switch {
	case policy == nil:
		return "<none>"
	case len(policy.From) == 0:
		return "no clients (only its own Pods and the controller)"
	}
	peers := make([]string, 0, len(policy.From))
	for _, p := range policy.From {
		peer := "every pod"
		if selectsSome(p.PodSelector) {
			peer = "pods " + metav1.FormatLabelSelector(p.PodSelector)
		}
		switch {
		case p.NamespaceSelector == nil && !selectsSome(p.PodSelector):
			peer += " of its namespace"
		case p.NamespaceSelector == nil:
		case selectsSome(p.NamespaceSelector):
			peer += " in namespaces " + metav1.FormatLabelSelector(p.NamespaceSelector)
		default:
			peer += " in every namespace"
		}
		peers = append(peers, peer)
	}
	return strings.Join(peers, "; ")
}

// selectsSome is whether s is a selector with a requirement; nil and {} select everything.
func selectsSome(s *metav1.LabelSelector) bool {
	return s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0)
}
