// Command bench measures database-apiserver against a CustomResourceDefinition of the same
// Database type on one local control plane, and database-controller against a plain client
// creating the same objects.
//
// It starts the control plane of internal/localcluster (kube-apiserver, our server, etcd,
// kube-controller-manager, kube-scheduler, kwok) on free ports in a temporary directory,
// installs the CRD of crd.yaml (the group crd.example.com, the same schema, subresources and
// printer columns as example.com/v1), stops the controller,
// and drives, alternating between them, four targets with identical client code:
//
//	ours-json    example.com through kube-apiserver (the aggregator), JSON
//	ours-proto   example.com through kube-apiserver, protobuf
//	ours-direct  example.com on our server's own port (admin client certificate), protobuf
//	crd          crd.example.com through kube-apiserver, JSON (a CRD cannot serve protobuf)
//
// Workload: create, get, update, merge patch, status update and delete at concurrency 1, 8
// and 32, LIST of a namespace of 1,000 and of 10,000 objects, watch latency at 10 watchers,
// CPU seconds of each server process per 1,000 requests, and the resident memory of our
// server and of kube-apiserver to hold 10,000 objects. Then it starts the controller and
// measures the time until 100 (and 1,000) new Databases are Ready, against the floor: their
// children created by a plain client with the controller's concurrency.
//
// It prints a table with the ratio ours/CRD of every row and writes results.json,
// results.md and PNG plots to -out (docs/benchmarks). `make bench` runs it; -quick is a
// smoke run of 2 to 4 minutes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// scale is how much work each part does.
type scale struct {
	Concurrency []int       `json:"concurrency"`
	Ops         map[int]int `json:"opsPerRow"` // CRUD ops per row, by concurrency
	RowBudget   Duration    `json:"rowBudget"` // a part of a row stops issuing ops after this long
	// Rounds is how many parts each row is run in, every target taking its turn in each.
	Rounds      int         `json:"rounds"`
	ListSmall   int         `json:"listSmall"`
	ListLarge   int         `json:"listLarge"`
	ListOps     map[int]int `json:"listOpsPerRow"`      // lists of ListSmall per row
	ListOpsL    map[int]int `json:"listLargeOpsPerRow"` // lists of ListLarge per row
	Watchers    int         `json:"watchers"`
	WatchWrites int         `json:"watchWrites"`
	Databases   []int       `json:"controllerDatabases"` // controller runs
	// FanoutWatchers are the watcher counts of the fan-out rows, FanoutCreates the creates
	// of each.
	FanoutWatchers []int `json:"fanoutWatchers"`
	FanoutCreates  int   `json:"fanoutCreates"`
	// Verbs are the verbs of the single-object rows (crudVerbs, in that order, by default);
	// NoList leaves out the LIST rows.
	Verbs  []string `json:"verbs"`
	NoList bool     `json:"noList,omitempty"`
	// ScaleObjects is the data set of the large part (-scale-large), 0 without it.
	ScaleObjects int `json:"scaleObjects,omitempty"`
	// MetricsWindow is each window of the metrics cost part (after the controller runs; 0
	// for none, the full run's default), MetricsScrapeInterval the time between its scrapes
	// (the PodMonitor's of artifacts/monitoring in the full run).
	MetricsWindow         Duration `json:"metricsWindow"`
	MetricsScrapeInterval Duration `json:"metricsScrapeInterval"`
}

func fullScale() scale {
	return scale{
		Concurrency:    []int{1, 8, 32},
		Ops:            map[int]int{1: 480, 8: 2400, 32: 2400},
		RowBudget:      Duration(20 * time.Second),
		Rounds:         6,
		ListSmall:      1000,
		ListLarge:      10000,
		ListOps:        map[int]int{1: 20, 8: 48, 32: 64},
		ListOpsL:       map[int]int{1: 4, 8: 8, 32: 32},
		Watchers:       10,
		WatchWrites:    200,
		Databases:      []int{100, 1000},
		FanoutWatchers: []int{100, 300, 1000},
		FanoutCreates:  50,
		Verbs:          crudVerbs,

		// The metrics cost part adds four windows and the controller's settling (9 to 10
		// minutes at 2m): it is asked for (-metrics-window), so the full run stays under 20.
		MetricsScrapeInterval: Duration(30 * time.Second),
	}
}

func quickScale() scale {
	return scale{
		Concurrency:    []int{1, 8, 32},
		Ops:            map[int]int{1: 40, 8: 160, 32: 160},
		RowBudget:      Duration(5 * time.Second),
		Rounds:         2,
		ListSmall:      200,
		ListLarge:      1000,
		ListOps:        map[int]int{1: 5, 8: 16, 32: 32},
		ListOpsL:       map[int]int{1: 2, 8: 8, 32: 32},
		Watchers:       10,
		WatchWrites:    40,
		Databases:      []int{50},
		FanoutWatchers: []int{30},
		FanoutCreates:  10,
		Verbs:          crudVerbs,

		MetricsWindow:         Duration(20 * time.Second),
		MetricsScrapeInterval: Duration(5 * time.Second),
	}
}

type options struct {
	root, crdPath, outDir, stateDir, profileDir string
	quick, keepState, skipAPI, skipController   bool
	databases                                   string
	opsScale                                    float64
	listLarge                                   int
	controllerArgs, apiserverArgs, kubeArgs     string
	replot                                      string
	kcmArgs, schedulerArgs                      string
	fanout                                      string
	fanoutOnly                                  bool
	verbs                                       string
	skipList                                    bool
	fanoutCreates                               int
	scaleLarge                                  bool
	scaleObjects, scaleDatabases                int
	metricsWindow                               time.Duration
}

// noConsistencyChecker turns off the watch cache's consistency check (k8s.io/apiserver's
// DetectCacheInconsistency, on by default): every 5 to 7.5 minutes it lists every object of
// every cached resource from etcd to compare digests with the cache, and that burst of CPU lands
// in whichever row runs then (at 100,000 CRD objects, more than half of kube-apiserver's CPU
// for the seconds it takes).
const (
	noConsistencyChecker    = "--feature-gates=DetectCacheInconsistency=false"
	noConsistencyCheckerWhy = "both servers' watch cache consistency checkers are off: their periodic LIST of every object from etcd would land in whichever row runs then"
)

func main() {
	var o options
	flag.StringVar(&o.root, "root", ".", "repository root (bin/, artifacts/, hack/tools/)")
	flag.StringVar(&o.crdPath, "crd", "", "a CustomResourceDefinition of databases to compare against, moved to the group crd.example.com (default: crd.yaml, built into the command)")
	flag.StringVar(&o.outDir, "out", "docs/benchmarks", "where results.json, results.md and the PNG plots go (relative to -root)")
	flag.StringVar(&o.stateDir, "dir", "", "state directory of the control plane (default: a new temporary one, removed at the end)")
	flag.BoolVar(&o.keepState, "keep", false, "keep the state directory (logs) at the end")
	flag.BoolVar(&o.quick, "quick", false, "a smoke run of 2 to 4 minutes: fewer operations, LIST of 200 and 1,000, 50 Databases, the metrics cost part in 20 s windows")
	flag.Float64Var(&o.opsScale, "ops-scale", 1, "multiply the CRUD and LIST operations per row by this")
	flag.IntVar(&o.listLarge, "list-large", 0, "objects in the large LIST namespace (default 10000, -quick 1000)")
	flag.StringVar(&o.databases, "databases", "", "comma-separated Database counts of the controller runs (default 100,1000; -quick 50)")
	flag.StringVar(&o.fanout, "fanout", "", "comma-separated watcher counts of the fan-out rows (default 100,300,1000; -quick 30; 0 for none)")
	flag.StringVar(&fanoutUser, "fanout-user", fanoutUser, "the user (and group) the fan-out rows impersonate; empty for the admin (system:masters)")
	flag.BoolVar(&fanoutOwnConns, "fanout-own-connections", false, "give every fan-out watcher its own connection")
	flag.BoolVar(&fanoutTable, "fanout-table", false, "fan-out watchers ask for server-side tables (as kubectl get -w)")
	flag.IntVar(&o.fanoutCreates, "fanout-creates", 0, "creates of each fan-out row (default 50, -quick 10)")
	flag.BoolVar(&o.fanoutOnly, "fanout-only", false, "run only the fan-out rows of the API benchmark (and no controller)")
	flag.BoolVar(&o.scaleLarge, "scale-large", false, "also run the large part: -scale-objects Databases and CRD objects (memory, a LIST in pages of 500, our server's start on them) and a controller run of -scale-databases")
	flag.IntVar(&o.scaleObjects, "scale-objects", 100000, "objects of each kind in the -scale-large data set")
	flag.IntVar(&o.scaleDatabases, "scale-databases", 10000, "Databases of the -scale-large controller run (0 for none)")
	flag.StringVar(&o.verbs, "verbs", "", "comma-separated verbs of the single-object rows, of "+strings.Join(crudVerbs, ",")+" (default all; every verb but create works on the objects create made, so create is always run)")
	flag.BoolVar(&o.skipList, "skip-list", false, "skip the LIST rows")
	flag.BoolVar(&o.skipAPI, "skip-api", false, "skip the API benchmark")
	flag.BoolVar(&o.skipController, "skip-controller", false, "skip the controller benchmark")
	flag.DurationVar(&o.metricsWindow, "metrics-window", -1, "each of the four windows of the metrics cost part, after the controller runs (0 for none: the default of the full run; -quick 20s)")
	flag.StringVar(&o.profileDir, "profile", "", "write CPU profiles of our server and kube-apiserver (steady CRUD and LIST loads after the API rows) and of the controller (the first 60 s of its largest run), and heap profiles of both servers holding the memory rows' objects, to this directory")
	flag.StringVar(&o.controllerArgs, "controller-args", "", "extra flags for database-controller, space-separated")
	flag.StringVar(&o.apiserverArgs, "apiserver-args", noConsistencyChecker, "extra flags for database-apiserver, space-separated: by default "+noConsistencyCheckerWhy)
	flag.StringVar(&o.kubeArgs, "kube-apiserver-args", noConsistencyChecker, "extra flags for kube-apiserver, space-separated: by default "+noConsistencyCheckerWhy)
	flag.StringVar(&o.kcmArgs, "kube-controller-manager-args", "--kube-api-qps=200 --kube-api-burst=400",
		"extra flags for kube-controller-manager, space-separated: by default its client limits are raised, so the controller benchmark's "+
			"floor is not kube-controller-manager's own rate limiter (20 QPS per controller)")
	flag.StringVar(&o.schedulerArgs, "kube-scheduler-args", "", "extra flags for kube-scheduler, space-separated")
	flag.StringVar(&o.replot, "replot", "", "run nothing: read this results.json and write results.md and the plots again to -out")
	flag.Parse()
	fanoutGroup = fanoutUser

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := benchmain
	if o.replot != "" {
		run = replot
	}
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func benchmain(ctx context.Context, o options) error {
	root, err := filepath.Abs(o.root)
	if err != nil {
		return err
	}
	if !filepath.IsAbs(o.outDir) {
		o.outDir = filepath.Join(root, o.outDir)
	}
	sc := fullScale()
	if o.quick {
		sc = quickScale()
	}
	if o.opsScale != 1 {
		for _, m := range []map[int]int{sc.Ops, sc.ListOps, sc.ListOpsL} {
			for k, v := range m {
				m[k] = max(1, int(float64(v)*o.opsScale))
			}
		}
	}
	if o.listLarge > 0 {
		sc.ListLarge = o.listLarge
	}
	if o.databases != "" {
		sc.Databases = nil
		for f := range strings.SplitSeq(o.databases, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("-databases: %q is not a positive number", f)
			}
			sc.Databases = append(sc.Databases, n)
		}
	}

	if o.fanout != "" {
		sc.FanoutWatchers = nil
		for f := range strings.SplitSeq(o.fanout, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 0 {
				return fmt.Errorf("-fanout: %q is not a number of watchers (0 for none)", f)
			}
			if n > 0 {
				sc.FanoutWatchers = append(sc.FanoutWatchers, n)
			}
		}
	}
	if o.metricsWindow >= 0 {
		sc.MetricsWindow = Duration(o.metricsWindow)
	}
	if o.fanoutCreates < 0 {
		return fmt.Errorf("-fanout-creates: %d is not a positive number (0 for the default)", o.fanoutCreates)
	}
	if o.fanoutCreates > 0 {
		sc.FanoutCreates = o.fanoutCreates
	}
	if o.fanoutOnly {
		o.skipController = true
	}
	if o.verbs != "" {
		verbs, err := parseVerbs(o.verbs)
		if err != nil {
			return err
		}
		sc.Verbs = verbs
	}
	sc.NoList = o.skipList
	if o.scaleLarge && o.scaleObjects < 1 {
		return fmt.Errorf("-scale-objects: %d is not a positive number", o.scaleObjects)
	}
	if o.scaleDatabases < 0 {
		return fmt.Errorf("-scale-databases: %d is not a number of Databases (0 for none)", o.scaleDatabases)
	}
	if o.scaleLarge {
		sc.ScaleObjects = o.scaleObjects
		if o.scaleDatabases > 0 {
			sc.Databases = append(sc.Databases, o.scaleDatabases)
		}
	}

	started := time.Now()
	res := &results{
		Meta: meta{
			Started:   started.UTC().Format(time.RFC3339),
			Quick:     o.quick,
			CPUs:      runtime.NumCPU(),
			GoVersion: runtime.Version(),
			LoadStart: loadAvg(),
			Commit:    gitCommit(root),
			Scale:     sc,
			ExtraArgs: map[string]string{
				"kube-apiserver":          o.kubeArgs,
				"database-apiserver":      o.apiserverArgs,
				"kube-controller-manager": o.kcmArgs,
				"kube-scheduler":          o.schedulerArgs,
				"database-controller":     strings.TrimSpace("--leader-elect=false " + o.controllerArgs),
			},
		},
	}
	b, err := newBench(ctx, o, root, sc)
	if err != nil {
		return err
	}
	defer b.stop()
	res.Meta.ClusterStart = round3(b.clusterStart.Seconds())

	// The large part first, on servers that have served nothing yet (its memory figures need
	// them fresh; the API part's memory row after it is not: run it with -skip-api).
	if o.scaleLarge && sc.ScaleObjects > 0 {
		if err := b.runScaleLarge(ctx, res); err != nil {
			return err
		}
	}
	if !o.skipAPI {
		if err := b.runAPI(ctx, res); err != nil {
			return err
		}
	}
	if !o.skipController {
		if err := b.runController(ctx, res); err != nil {
			return err
		}
	}
	res.Meta.LoadEnd = loadAvg()
	res.Meta.Seconds = round3(time.Since(started).Seconds())

	printTable(os.Stdout, res)
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return err
	}
	if err := writeResults(o.outDir, res); err != nil {
		return err
	}
	if err := writePlots(o.outDir, res); err != nil {
		return err
	}
	fmt.Printf("\nbench: done in %v; results in %s\n", time.Since(started).Round(time.Second), o.outDir)
	return nil
}

func replot(_ context.Context, o options) error {
	data, err := os.ReadFile(o.replot)
	if err != nil {
		return err
	}
	res := &results{}
	if err := json.Unmarshal(data, res); err != nil {
		return fmt.Errorf("%s: %w", o.replot, err)
	}
	out := o.outDir
	if !filepath.IsAbs(out) {
		out = filepath.Join(o.root, out)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	printTable(os.Stdout, res)
	if err := writeResults(out, res); err != nil {
		return err
	}
	return writePlots(out, res)
}

// Duration marshals as seconds.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatFloat(time.Duration(d).Seconds(), 'f', -1, 64)), nil
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	*d = Duration(f * float64(time.Second))
	return err
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// parseVerbs returns the verbs of the comma-separated list, in the order of crudVerbs, with
// create first whatever the list says: the other verbs work on the objects it makes. It
// returns an error that names a verb not in crudVerbs.
func parseVerbs(list string) ([]string, error) {
	want := map[string]bool{"create": true}
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(crudVerbs, f) {
			return nil, fmt.Errorf("-verbs: %q is not one of %s", f, strings.Join(crudVerbs, ", "))
		}
		want[f] = true
	}
	var verbs []string
	for _, v := range crudVerbs {
		if want[v] {
			verbs = append(verbs, v)
		}
	}
	return verbs, nil
}
