package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type results struct {
	Meta meta `json:"meta"`
	// Fanout are the fan-out rows: many watchers, creates one at a time.
	Fanout []fanoutRow `json:"fanout,omitempty"`
	// Scale is the large data set part (-scale-large).
	Scale   *scaleResult `json:"scale,omitempty"`
	Targets []targetInfo `json:"targets"`
	// IdleCPU is each server's CPU use (cores) with no benchmark traffic, measured before the
	// API rows; the rows' CPU numbers include it.
	IdleCPU    map[string]float64 `json:"idleCPUCores"`
	Rows       []row              `json:"rows"`
	Watch      []watchRow         `json:"watch"`
	Memory     *memoryResult      `json:"memory,omitempty"`
	Controller []controllerRun    `json:"controller"`
	// MetricsCost is what scraping the controller's per-Database metrics costs it.
	MetricsCost *metricsCostResult `json:"metricsCost,omitempty"`
}

type meta struct {
	Started      string  `json:"started"`
	Seconds      float64 `json:"seconds"`
	ClusterStart float64 `json:"clusterStartSeconds"`
	Quick        bool    `json:"quick"`
	CPUs         int     `json:"cpus"`
	GoVersion    string  `json:"goVersion"`
	Commit       string  `json:"commit"`
	LoadStart    string  `json:"loadAverageAtStart"`
	LoadEnd      string  `json:"loadAverageAtEnd"`
	Scale        scale   `json:"scale"`
	// Extra flags given to the components (hack/bench flags).
	ExtraArgs map[string]string `json:"extraArgs,omitempty"`
}

type targetInfo struct {
	Name  string   `json:"name"`
	Desc  string   `json:"description"`
	Procs []string `json:"serverProcesses"`
}

// row is one line of the table: one verb, on one target, at one concurrency.
type row struct {
	Target      string `json:"target"`
	Verb        string `json:"verb"`
	Objects     int    `json:"objects,omitempty"` // LIST: objects in the namespace
	Concurrency int    `json:"concurrency"`
	Ops         int    `json:"ops"`
	Errors      int    `json:"errors"`
	FirstError  string `json:"firstError,omitempty"`
	Seconds     float64
	Throughput  float64   `json:"throughput"` // successful requests per second
	Latency     latencies `json:"latencyMs"`
	// CPU is the CPU seconds each server process used during the row.
	CPU map[string]float64 `json:"cpuSeconds"`
	// ServerCPUPer1k is the CPU seconds of the processes the target's requests go through,
	// per 1,000 successful requests.
	ServerCPUPer1k float64 `json:"serverCPUSecondsPer1k"`
	// AllCPUPer1k adds this process (the clients, and the etcd both servers share) and the
	// server process the target does not use (idle, or watching): everything the row cost.
	AllCPUPer1k float64 `json:"allCPUSecondsPer1k"`
}

type watchRow struct {
	Target   string    `json:"target"`
	Watchers int       `json:"watchers"`
	Writes   int       `json:"writes"`
	Events   int       `json:"events"`
	Missing  int       `json:"missing"`
	Latency  latencies `json:"latencyMs"`
}

type memSample struct {
	RSSMiB       float64 `json:"rssMiB"`
	HWMMiB       float64 `json:"peakRssMiB"`
	HeapInuseMiB float64 `json:"heapInuseMiB"`
}

type memoryResult struct {
	Objects int `json:"objects"`
	// Our server before and after Objects Databases were created on its own port, and at the
	// end (with the CRD's objects created too).
	OursBefore memSample `json:"oursBefore"`
	OursAfter  memSample `json:"oursAfter"`
	OursEnd    memSample `json:"oursEnd"`
	// kube-apiserver at the start, after our Databases (which it did not serve), and after
	// Objects objects of the CRD.
	KubeBefore memSample `json:"kubeBefore"`
	KubeMid    memSample `json:"kubeMid"`
	KubeAfter  memSample `json:"kubeAfter"`
	// What holding Objects objects added to each server's resident memory and Go heap.
	OursDeltaMiB  float64 `json:"oursRssDeltaMiB"`
	KubeDeltaMiB  float64 `json:"kubeRssDeltaMiB"`
	OursHeapDelta float64 `json:"oursHeapDeltaMiB"`
	KubeHeapDelta float64 `json:"kubeHeapDeltaMiB"`
	// Ratio is OursDeltaMiB / KubeDeltaMiB (goal ≤ 0.5).
	Ratio float64 `json:"ratio"`
	// Both servers again after etcd was compacted past the creates (their watch caches then
	// drop the snapshots of the creates' history) and a garbage collection: what holding the
	// objects costs once the creates are history, and the deltas from the same baselines.
	OursSettled          memSample `json:"oursSettled"`
	KubeSettled          memSample `json:"kubeSettled"`
	OursSettledDeltaMiB  float64   `json:"oursSettledRssDeltaMiB"`
	KubeSettledDeltaMiB  float64   `json:"kubeSettledRssDeltaMiB"`
	OursSettledHeapDelta float64   `json:"oursSettledHeapDeltaMiB"`
	KubeSettledHeapDelta float64   `json:"kubeSettledHeapDeltaMiB"`
	SettledRatio         float64   `json:"settledRatio"`
}

// controllerRun is one controller (or floor) run.
type controllerRun struct {
	Kind        string `json:"kind"` // "controller" or "floor"
	Databases   int    `json:"databases"`
	Concurrency int    `json:"concurrency"` // the controller's workers; the floor's clients
	Complete    bool   `json:"complete"`
	Ready       int    `json:"ready"`
	// Seconds is the time from the first create to the last Database Ready (controller) or
	// the last StatefulSet ready (floor).
	Seconds float64 `json:"seconds"`
	// StatefulSetsSeconds is the time until the last StatefulSet was ready (both kinds).
	StatefulSetsSeconds float64 `json:"statefulSetsSeconds"`
	CreateSeconds       float64 `json:"createSeconds"` // creating the Databases (the floor: every child)
	ReadyP50            float64 `json:"readyP50Seconds"`
	ReadyP99            float64 `json:"readyP99Seconds"`
	// Curve is the number of ready objects over time (seconds).
	Curve [][2]float64 `json:"curve"`

	// Controller only, from its /metrics.
	Reconciles          float64            `json:"reconciles,omitempty"`
	ReconcilesPerSecond float64            `json:"reconcilesPerSecond,omitempty"`
	ReconcileErrors     float64            `json:"reconcileErrors,omitempty"`
	QueueLatencyMs      *latencies         `json:"queueLatencyMs,omitempty"`
	ReconcileMs         *latencies         `json:"reconcileDurationMs,omitempty"`
	Requests            float64            `json:"controllerRequests,omitempty"`
	RequestsByVerb      map[string]float64 `json:"controllerRequestsByVerb,omitempty"`
	RSSMiB              float64            `json:"controllerRssMiB,omitempty"`
	PeakRSSMiB          float64            `json:"controllerPeakRssMiB,omitempty"`
	CPU                 map[string]float64 `json:"cpuSeconds"`
	Args                []string           `json:"controllerArgs,omitempty"`
}

// crdRow finds the CRD's row matching r.
func crdRow(res *results, r row) *row {
	for i := range res.Rows {
		c := &res.Rows[i]
		if c.Target == "crd" && c.Verb == r.Verb && c.Objects == r.Objects && c.Concurrency == r.Concurrency {
			return c
		}
	}
	return nil
}

// ratio is a/b (0 when b is 0), unrounded: the tables round it once, when printing.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func verbName(r row) string {
	if r.Objects > 0 {
		switch r.Verb {
		case verbListPaginated:
			return fmt.Sprintf("list %d in pages of %d", r.Objects, pageLimit)
		case verbListPaginatedEtcd:
			return fmt.Sprintf("list %d in pages of %d after a compaction (continued pages from etcd)", r.Objects, pageLimit)
		}
		return fmt.Sprintf("list %d", r.Objects)
	}
	return r.Verb
}

// printMemory writes what holding m.Objects objects added to each server, right after the
// creates and settled, as a Markdown table and the two ratios ours/CRD.
func printMemory(w io.Writer, m *memoryResult) {
	fmt.Fprintln(w, "\n| server | objects | RSS before MiB | after the creates: RSS MiB | RSS added | heap added | settled: RSS MiB | RSS added | heap added |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|")
	fmt.Fprintf(w, "| database-apiserver | %d Databases | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", m.Objects, m.OursBefore.RSSMiB,
		m.OursAfter.RSSMiB, m.OursDeltaMiB, m.OursHeapDelta, m.OursSettled.RSSMiB, m.OursSettledDeltaMiB, m.OursSettledHeapDelta)
	fmt.Fprintf(w, "| kube-apiserver | %d CRD objects | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", m.Objects, m.KubeMid.RSSMiB,
		m.KubeAfter.RSSMiB, m.KubeDeltaMiB, m.KubeHeapDelta, m.KubeSettled.RSSMiB, m.KubeSettledDeltaMiB, m.KubeSettledHeapDelta)
	fmt.Fprintf(w, "\nratio ours/CRD (RSS added): **%.2f×** after the creates, **%.2f×** settled (etcd compacted past them, garbage collected); our server's whole RSS holding them: %.0f MiB, %.0f MiB settled\n",
		m.Ratio, m.SettledRatio, m.OursAfter.RSSMiB, m.OursSettled.RSSMiB)
}

// printTable writes the results as Markdown tables: every row with its ratio ours/CRD.
func printTable(w io.Writer, res *results) {
	if len(res.Rows) > 0 {
		fmt.Fprintf(w, "\n### API: throughput, latency and the ratio ours/CRD (same verb, same concurrency)\n\n")
		fmt.Fprintln(w, "| verb | conc | target | req/s (lists in pages: objects/s) | p50 ms | p99 ms | ours/CRD req/s | ours/CRD p99 | server CPU s/1k req | errors |")
		fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, r := range res.Rows {
			c := crdRow(res, r)
			rt, rp := "", ""
			if c != nil {
				rt = fmt.Sprintf("%.2f×", ratio(r.Throughput, c.Throughput))
				rp = fmt.Sprintf("%.2f×", ratio(r.Latency.P99, c.Latency.P99))
			}
			fmt.Fprintf(w, "| %s | %d | %s | %.1f | %.1f | %.1f | %s | %s | %.2f | %d |\n",
				verbName(r), r.Concurrency, r.Target, r.Throughput, r.Latency.P50, r.Latency.P99, rt, rp, r.ServerCPUPer1k, r.Errors)
		}
	}
	if len(res.Watch) > 0 {
		var crd *watchRow
		for i := range res.Watch {
			if res.Watch[i].Target == "crd" {
				crd = &res.Watch[i]
			}
		}
		fmt.Fprintf(w, "\n### Watch: from the start of a create to its event at each of %d watchers\n\n", res.Watch[0].Watchers)
		fmt.Fprintln(w, "| target | events | missing | p50 ms | p99 ms | max ms | ours/CRD p50 | ours/CRD p99 |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, x := range res.Watch {
			r50, r99 := "", ""
			if crd != nil {
				r50 = fmt.Sprintf("%.2f×", ratio(x.Latency.P50, crd.Latency.P50))
				r99 = fmt.Sprintf("%.2f×", ratio(x.Latency.P99, crd.Latency.P99))
			}
			fmt.Fprintf(w, "| %s | %d | %d | %.1f | %.1f | %.1f | %s | %s |\n", x.Target, x.Events, x.Missing,
				x.Latency.P50, x.Latency.P99, x.Latency.Max, r50, r99)
		}
	}
	if len(res.Fanout) > 0 {
		fmt.Fprintf(w, "\n### Fan-out: N watchers through kube-apiserver, creates one at a time (each after its event reached every watcher)\n\n")
		fmt.Fprintln(w, "| watchers | target | creates | events | lost | create p50 ms | create p99 ms | delivery p50 ms | delivery p99 ms | create p99 / ConfigMaps' | create p99 / CRD's | server's own create ms | CPU s (kube + ours) |")
		fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, f := range res.Fanout {
			rc, rd := "", ""
			if c := fanoutRowOf(res, "configmaps", f.Watchers); c != nil {
				rc = fmt.Sprintf("%.2f×", ratio(f.Create.P99, c.Create.P99))
			}
			if c := fanoutRowOf(res, "crd", f.Watchers); c != nil {
				rd = fmt.Sprintf("%.2f×", ratio(f.Create.P99, c.Create.P99))
			}
			errs := ""
			if f.Error != "" {
				errs = " (" + f.Error + ")"
			}
			fmt.Fprintf(w, "| %d | %s%s | %d | %d | %d | %.1f | %.1f | %.1f | %.1f | %s | %s | %.1f | %.2f |\n", f.Watchers, f.Target, errs, f.Creates,
				f.Events, f.Lost, f.Create.P50, f.Create.P99, f.Delivery.P50, f.Delivery.P99, rc, rd, f.ServerCreateMs, f.CPU[procKube]+f.CPU[procOurs])
		}
	}
	if s := res.Scale; s != nil {
		fmt.Fprintf(w, "\n### %d objects: memory, and our server's start on them\n", s.Objects)
		if m := s.Memory; m != nil {
			printMemory(w, m)
		}
		fmt.Fprintf(w, "\nour server started again on them: /readyz ok after %.1f s, its watch cache serving after %.1f s\n", s.ReadySeconds, s.CacheSeconds)
	}
	if m := res.Memory; m != nil {
		fmt.Fprintf(w, "\n### Memory to hold %d objects (resident set, VmRSS; Go heap in use from /metrics)\n", m.Objects)
		printMemory(w, m)
	}
	if len(res.Controller) > 0 {
		fmt.Fprintf(w, "\n### Controller: time until every Database is Ready, against the floor (a plain client creating the same children)\n\n")
		fmt.Fprintln(w, "| run | databases | conc | complete | seconds | StatefulSets ready s | ratio to floor | reconciles | reconciles/s | queue p50/p99 ms | reconcile p50/p99 ms | requests/db | RSS MiB (peak) |")
		fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|---:|---:|---:|---|---|---:|---|")
		for _, c := range res.Controller {
			rf := ""
			if c.Kind == "controller" {
				for _, f := range res.Controller {
					if f.Kind == "floor" && f.Databases == c.Databases && f.Seconds > 0 {
						rf = fmt.Sprintf("**%.2f×**", c.Seconds/f.Seconds)
					}
				}
			}
			q, rec, reqs, rss := "", "", "", ""
			if c.QueueLatencyMs != nil {
				q = histQuantiles(c.QueueLatencyMs)
			}
			if c.ReconcileMs != nil {
				rec = histQuantiles(c.ReconcileMs)
			}
			if c.Kind == "controller" {
				reqs = fmt.Sprintf("%.1f", c.Requests/float64(c.Databases))
				rss = fmt.Sprintf("%.0f (%.0f)", c.RSSMiB, c.PeakRSSMiB)
			}
			fmt.Fprintf(w, "| %s | %d | %d | %v | %.1f | %.1f | %s | %.0f | %.1f | %s | %s | %s | %s |\n",
				c.Kind, c.Databases, c.Concurrency, c.Complete, c.Seconds, c.StatefulSetsSeconds, rf,
				c.Reconciles, c.ReconcilesPerSecond, q, rec, reqs, rss)
		}
	}
	if m := res.MetricsCost; m != nil {
		fmt.Fprintf(w, "\n### Controller: what its metrics cost, scraped every %.0f s against not scraped (%d Databases in its cache)\n", time.Duration(m.ScrapeInterval).Seconds(), m.Databases)
		printMetricsCost(w, m)
	}
	fmt.Fprintf(w, "\nGoals:\n\n")
	for _, g := range goals(res) {
		fmt.Fprintf(w, "- %s\n", g)
	}
}

// fanoutRowOf finds the fan-out row of target at watchers.
func fanoutRowOf(res *results, target string, watchers int) *fanoutRow {
	for i := range res.Fanout {
		if f := &res.Fanout[i]; f.Target == target && f.Watchers == watchers && f.Error == "" {
			return f
		}
	}
	return nil
}

// histQuantiles prints p50 / p99 of a histogram, "≥" where the quantile is past its top bucket.
func histQuantiles(l *latencies) string {
	f := func(name string, v float64) string {
		for _, c := range l.Capped {
			if c == name {
				return fmt.Sprintf("≥%.0f", v)
			}
		}
		return fmt.Sprintf("%.0f", v)
	}
	return f("p50", l.P50) + " / " + f("p99", l.P99)
}

// controllerGoals are the controller's goals: the most its time to Ready may be, as a ratio
// to the floor's, by Database count.
var controllerGoals = map[int]float64{1000: 1.3, 10000: 1.2}

// The goals of the fan-out and large data set rows, and the count each is set for.
const (
	fanoutGoalWatchers = 1000
	fanoutGoalRatio    = 1.5 // create p99, ours-proto / ConfigMaps, at fanoutGoalWatchers
	scaleGoalObjects   = 100000
	memoryGoalRatio    = 0.5 // memory for ListLarge objects, ours / kube-apiserver's for the CRD's
	scaleMemoryGoal    = 0.3 // memory for scaleGoalObjects objects, ours / kube-apiserver's for the CRD's
	scaleListGoal      = 3.0 // a paginated LIST of every object, ours-proto / the CRD's
	getGoal            = 0.85
)

// memoryGoal is the goal line of a memory result: ours at most goal times what kube-apiserver
// added for the CRD's objects, both right after the creates and settled (verdict turns the
// outcome into the line's word).
func memoryGoal(m *memoryResult, goal float64, verdict func(bool) string) string {
	ok := m.Ratio > 0 && m.Ratio <= goal && m.SettledRatio > 0 && m.SettledRatio <= goal
	return fmt.Sprintf("memory for %d objects ≤ %.1f× kube-apiserver's for the CRD's, after the creates and settled: %s (%.2f×: +%.0f MiB against +%.0f MiB; settled %.2f×: +%.0f MiB against +%.0f MiB)",
		m.Objects, goal, verdict(ok), m.Ratio, m.OursDeltaMiB, m.KubeDeltaMiB, m.SettledRatio, m.OursSettledDeltaMiB, m.KubeSettledDeltaMiB)
}

// forReference is the verdict of a goal measured at another size than the one it is set for.
func forReference(size int) string { return fmt.Sprintf("for reference, the goal is for %d", size) }

// goals evaluates the benchmark's goals from the results: at concurrency 8 every verb at least
// the CRD's throughput, GET (protobuf) at least getGoal of it and a LIST of the large
// namespace at least twice it; memory for the stored objects at most half kube-apiserver's
// for the CRD's; with many watchers a create's p99 at most fanoutGoalRatio the ConfigMaps',
// no event lost; on the large data set memory at most scaleMemoryGoal and a paginated LIST
// at least scaleListGoal the CRD's; the controller's time to Ready within controllerGoals.
func goals(res *results) []string {
	var out []string
	mark := func(ok bool) string {
		if ok {
			return "MET"
		}
		return "NOT MET"
	}
	for _, ours := range []string{"ours-proto", "ours-json"} {
		var worst *row
		worstRatio := 0.0
		n := 0
		for _, r := range res.Rows {
			if r.Target != ours || r.Concurrency != 8 || r.Objects == res.Meta.Scale.ListLarge {
				continue
			}
			c := crdRow(res, r)
			if c == nil {
				continue
			}
			n++
			if x := ratio(r.Throughput, c.Throughput); worst == nil || x < worstRatio {
				worst, worstRatio = &r, x
			}
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("%s: every verb at concurrency 8 ≥ 1.0× the CRD's throughput: %s (lowest: %s at %.2f×)",
				ours, mark(worstRatio >= 1), verbName(*worst), worstRatio))
		}
		for _, r := range res.Rows {
			if r.Target == ours && r.Concurrency == 8 && r.Objects == res.Meta.Scale.ListLarge {
				if c := crdRow(res, r); c != nil {
					x := ratio(r.Throughput, c.Throughput)
					out = append(out, fmt.Sprintf("%s: LIST of %d at concurrency 8 ≥ 2× the CRD's: %s (%.2f×)", ours, r.Objects, mark(x >= 2), x))
				}
			}
		}
	}
	for _, r := range res.Rows {
		if r.Target == "ours-proto" && r.Verb == "get" && r.Concurrency == 8 {
			if c := crdRow(res, r); c != nil {
				x := ratio(r.Throughput, c.Throughput)
				out = append(out, fmt.Sprintf("ours-proto: GET at concurrency 8 ≥ %.2f× the CRD's: %s (%.2f×)", getGoal, mark(x >= getGoal), x))
			}
		}
	}
	most := 0
	for _, f := range res.Fanout {
		most = max(most, f.Watchers)
	}
	if f, c := fanoutRowOf(res, "ours-proto", most), fanoutRowOf(res, "configmaps", most); f != nil && c != nil {
		x := ratio(f.Create.P99, c.Create.P99)
		verdict := mark(x <= fanoutGoalRatio && f.Lost == 0)
		if most != fanoutGoalWatchers {
			verdict = forReference(fanoutGoalWatchers)
		}
		out = append(out, fmt.Sprintf("fan-out: %d watchers through kube-apiserver, create p99 ≤ %.1f× the ConfigMaps' and no event lost: %s (%.2f×: %.1f ms against %.1f ms; %d of %d events lost)",
			most, fanoutGoalRatio, verdict, x, f.Create.P99, c.Create.P99, f.Lost, f.Lost+f.Events))
	}
	if sr := res.Scale; sr != nil {
		verdict := func(ok bool) string {
			if sr.Objects != scaleGoalObjects {
				return forReference(scaleGoalObjects)
			}
			return mark(ok)
		}
		if m := sr.Memory; m != nil {
			out = append(out, memoryGoal(m, scaleMemoryGoal, verdict))
		}
		for _, r := range res.Rows {
			if r.Target == "ours-proto" && (r.Verb == verbListPaginated || r.Verb == verbListPaginatedEtcd) {
				if c := crdRow(res, r); c != nil {
					x := ratio(r.Throughput, c.Throughput)
					out = append(out, fmt.Sprintf("ours-proto: %s ≥ %.0f× the CRD's throughput: %s (%.2f×: %.0f against %.0f objects/s)",
						verbName(r), scaleListGoal, verdict(x >= scaleListGoal && r.Errors == 0), x, r.Throughput, c.Throughput))
				}
			}
		}
	}
	if m := res.Memory; m != nil {
		out = append(out, memoryGoal(m, memoryGoalRatio, mark))
	}
	for _, c := range res.Controller {
		if c.Kind != "controller" {
			continue
		}
		for _, f := range res.Controller {
			if f.Kind == "floor" && f.Databases == c.Databases && f.Seconds > 0 {
				x := c.Seconds / f.Seconds
				bound, ok := controllerGoals[c.Databases]
				verdict := mark(c.Complete && x <= bound)
				if !ok {
					bound, verdict = controllerGoals[1000], forReference(1000)
				}
				out = append(out, fmt.Sprintf("controller: time to Ready for %d Databases ≤ %.1f× the floor: %s (%.2f×: %.1f s against %.1f s)",
					c.Databases, bound, verdict, x, c.Seconds, f.Seconds))
			}
		}
	}
	if m := res.MetricsCost; m != nil {
		out = append(out, metricsCostGoalLine(m, mark))
	}
	return out
}

func writeResults(dir string, res *results) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmark results\n\nWritten by `make bench` (hack/bench) on %s; commit %s; %d CPUs; load average %s at the start, %s at the end; %.0f s in all (control plane start %.0f s).%s\n",
		res.Meta.Started, res.Meta.Commit, res.Meta.CPUs, res.Meta.LoadStart, res.Meta.LoadEnd, res.Meta.Seconds, res.Meta.ClusterStart,
		map[bool]string{true: " **Quick run** (-quick): small counts, a smoke test only.", false: ""}[res.Meta.Quick])
	for _, k := range []string{"kube-apiserver", "database-apiserver", "kube-controller-manager", "kube-scheduler", "database-controller"} {
		if v := res.Meta.ExtraArgs[k]; v != "" {
			fmt.Fprintf(&b, "\nExtra flags of %s: `%s`.\n", k, v)
		}
	}
	if len(res.Targets) > 0 {
		b.WriteString("\nTargets:\n\n")
		for _, t := range res.Targets {
			fmt.Fprintf(&b, "- `%s`: %s (server processes: %s)\n", t.Name, t.Desc, strings.Join(t.Procs, ", "))
		}
		if len(res.IdleCPU) > 0 {
			fmt.Fprintf(&b, "\nIdle CPU before the rows (cores, included in the rows' CPU): kube-apiserver %.3f, database-apiserver %.3f.\n",
				res.IdleCPU[procKube], res.IdleCPU[procOurs])
		}
	}
	printTable(&b, res)
	return os.WriteFile(filepath.Join(dir, "results.md"), []byte(b.String()), 0o644)
}
