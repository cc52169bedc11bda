package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/internal/localcluster"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/app"
	"example.com/database-apiserver/pkg/controller/specs"

	// The bench builds the children of every engine of the repository.
	_ "example.com/database-apiserver/pkg/engine/engines"
)

// runController measures the controller: for each size, ABBA-ordered (floor, controller,
// controller, floor, ...) so neither kind always runs on the emptier cluster.
func (b *bench) runController(ctx context.Context, res *results) error {
	// kwok's node holds 110 Pods and 32 CPUs as shipped; the runs leave their Pods in place.
	total := 0
	for _, n := range b.sc.Databases {
		total += 2 * n
	}
	room := fmt.Sprintf(`{"pods":"%d","cpu":"%d","memory":"%dGi"}`, total+200, 4*(total+200), 16*(total+200))
	patch := fmt.Sprintf(`{"status":{"capacity":%s,"allocatable":%s}}`, room, room)
	if _, err := b.kube.CoreV1().Nodes().Patch(ctx, localcluster.FakeNodeName, types.MergePatchType, []byte(patch),
		metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("raising the node's pod capacity: %w", err)
	}

	// Each Database has a ClusterIP Service; the cluster's range (a /24) holds 254.
	if _, err := b.kube.NetworkingV1().ServiceCIDRs().Create(ctx, &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16"}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("adding a ServiceCIDR: %w", err)
	}

	logf("starting %s", procCtl)
	if err := b.cluster.StartController(ctx); err != nil {
		return err
	}
	workers := app.DefaultWorkers
	for _, a := range strings.Fields(b.o.controllerArgs) {
		if v, ok := strings.CutPrefix(a, "--workers="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				workers = n
			}
		}
	}
	floorCfg := rest.CopyConfig(b.cluster.AdminConfig)
	floorCfg.QPS = -1
	floorCfg.ContentType = contentProtobuf
	floorCfg.AcceptContentTypes = contentProtobuf + "," + contentJSON
	floorKube, err := kubernetes.NewForConfig(floorCfg)
	if err != nil {
		return err
	}

	for i, n := range b.sc.Databases {
		kinds := []string{"floor", "controller"}
		if i%2 == 1 {
			kinds = []string{"controller", "floor"}
		}
		for _, kind := range kinds {
			var r controllerRun
			var err error
			if kind == "floor" {
				r, err = b.floorRun(ctx, floorKube, n, workers)
			} else {
				r, err = b.controllerRun(ctx, n, workers, n == slices.Max(b.sc.Databases))
			}
			if err != nil {
				return err
			}
			res.Controller = append(res.Controller, r)
			logf("  %-10s %5d: %s in %.1f s (StatefulSets %.1f s), %d ready; %.0f reconciles (%.1f/s), %.0f requests",
				kind, n, map[bool]string{true: "all Ready", false: "NOT all Ready"}[r.Complete], r.Seconds,
				r.StatefulSetsSeconds, r.Ready, r.Reconciles, r.ReconcilesPerSecond, r.Requests)
		}
	}
	if w := time.Duration(b.sc.MetricsWindow); w > 0 {
		logf("metrics cost: four windows of %v, scraped every %v in two", w, time.Duration(b.sc.MetricsScrapeInterval))
		m, err := b.runMetricsCost(ctx, w, time.Duration(b.sc.MetricsScrapeInterval))
		if err != nil {
			return fmt.Errorf("metrics cost: %w", err)
		}
		res.MetricsCost = m
	}
	return nil
}

// readyTimeout bounds a run of n Databases (a run past it is reported incomplete, and as taking
// this long): 5 minutes for 1,000.
func readyTimeout(n int) time.Duration {
	return max(2*time.Minute, time.Duration(n)*300*time.Millisecond)
}

func (b *bench) controllerRun(ctx context.Context, n, workers int, profile bool) (controllerRun, error) {
	ns := fmt.Sprintf("ctl-%d", n)
	if err := b.ensureNamespace(ctx, ns); err != nil {
		return controllerRun{}, err
	}
	ctlPID := b.cluster.PID(procCtl)
	meter := cpuMeter{procKube: b.cpu[procKube], procOurs: b.cpu[procOurs], procCtl: ctlPID}
	client := b.targets[1].client // ours-proto: through kube-apiserver, as users and the controller
	before, err := httpGet(ctx, b.controller, b.cluster.ControllerURL+"/metrics")
	if err != nil {
		return controllerRun{}, err
	}

	dbs := newTracker()
	stss := newTracker()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := watchDatabases(wctx, client, ns, dbs); err != nil {
		return controllerRun{}, err
	}
	if err := watchStatefulSets(wctx, b.kube, ns, stss); err != nil {
		return controllerRun{}, err
	}
	var waitProfile func() error
	if profile && b.o.profileDir != "" {
		waitProfile = profileCPU(ctx, nil, b.controller, b.cluster.ControllerURL,
			filepath.Join(b.o.profileDir, fmt.Sprintf("controller-%d.pprof", n)), 60)
	}

	cpu0 := meter.sample()
	t0 := time.Now()
	dbs.start(t0)
	stss.start(t0)
	r := run(ctx, 32, n, time.Hour, func(ctx context.Context, i int) error {
		db := newDatabase(fmt.Sprintf("db-%04d", i))
		db.Labels = map[string]string{"bench": "controller"}
		_, err := client.Create(ctx, ns, db)
		return err
	})
	if r.Errors > 0 {
		return controllerRun{}, fmt.Errorf("creating Databases: %d errors, first: %s", r.Errors, r.FirstErr)
	}
	createSeconds := time.Since(t0).Seconds()
	complete := dbs.wait(ctx, n, readyTimeout(n))
	stss.wait(ctx, n, time.Second)
	cpu := meter.since(cpu0)
	after, err := httpGet(ctx, b.controller, b.cluster.ControllerURL+"/metrics")
	if err != nil {
		return controllerRun{}, err
	}
	rss, hwm, _ := procMem(ctlPID)
	if waitProfile != nil {
		if err := waitProfile(); err != nil {
			logf("controller profile: %v", err)
		}
	}

	out := controllerRun{
		Kind:                "controller",
		Databases:           n,
		Concurrency:         workers,
		Complete:            complete,
		Ready:               dbs.count(),
		Seconds:             round3(dbs.last().Seconds()),
		StatefulSetsSeconds: round3(stss.last().Seconds()),
		CreateSeconds:       round3(createSeconds),
		Curve:               dbs.curve(),
		CPU:                 cpu,
		RSSMiB:              mib(rss),
		PeakRSSMiB:          mib(hwm),
		Args:                append([]string{"--leader-elect=false"}, strings.Fields(b.o.controllerArgs)...),
	}
	if !complete {
		out.Seconds = round3(readyTimeout(n).Seconds())
	}
	out.ReadyP50, out.ReadyP99 = dbs.quantiles()
	delta := func(name string, labels ...string) float64 {
		return metricValue(after, name, labels...) - metricValue(before, name, labels...)
	}
	out.Reconciles = delta("database_controller_reconcile_total")
	out.ReconcileErrors = delta("database_controller_reconcile_total", `result="error"`)
	if out.Seconds > 0 {
		out.ReconcilesPerSecond = round3(out.Reconciles / out.Seconds)
	}
	out.QueueLatencyMs = histogramQuantiles(before, after, "workqueue_queue_duration_seconds", `name="database-controller"`)
	out.ReconcileMs = histogramQuantiles(before, after, "database_controller_reconcile_duration_seconds")
	out.RequestsByVerb = map[string]float64{}
	for _, verb := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		v := delta("rest_client_requests_total", `method="`+verb+`"`)
		if v > 0 {
			out.RequestsByVerb[verb] = v
			out.Requests += v
		}
	}
	return out, nil
}

// floorRun creates, with a plain client and conc workers, the children the controller would
// create for n Databases (specs.NewChildren, owner references dropped: there is no
// Database), and times until every StatefulSet is ready.
func (b *bench) floorRun(ctx context.Context, kube kubernetes.Interface, n, conc int) (controllerRun, error) {
	ns := fmt.Sprintf("floor-%d", n)
	if err := b.ensureNamespace(ctx, ns); err != nil {
		return controllerRun{}, err
	}
	meter := cpuMeter{procKube: b.cpu[procKube], procOurs: b.cpu[procOurs]}
	stss := newTracker()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := watchStatefulSets(wctx, b.kube, ns, stss); err != nil {
		return controllerRun{}, err
	}
	cpu0 := meter.sample()
	t0 := time.Now()
	stss.start(t0)
	r := run(ctx, conc, n, time.Hour, func(ctx context.Context, i int) error {
		db := newDatabase(fmt.Sprintf("db-%04d", i))
		db.Namespace, db.UID = ns, uuid.NewUUID()
		c, err := specs.NewChildren(db, "floor-password", "database-system")
		if err != nil {
			return err
		}
		c.Secret.OwnerReferences = nil
		c.HeadlessService.OwnerReferences = nil
		c.ClientService.OwnerReferences = nil
		c.StatefulSet.OwnerReferences = nil
		for k := range c.StatefulSet.Spec.VolumeClaimTemplates {
			c.StatefulSet.Spec.VolumeClaimTemplates[k].OwnerReferences = nil
		}
		if _, err := kube.CoreV1().Secrets(ns).Create(ctx, c.Secret, metav1.CreateOptions{}); err != nil {
			return err
		}
		services := []*corev1.Service{c.HeadlessService, c.ClientService}
		if c.ReadService != nil {
			c.ReadService.OwnerReferences = nil
			services = append(services, c.ReadService)
		}
		for _, svc := range services {
			if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		if cm := c.ReplicationConfigMap; cm != nil {
			cm.OwnerReferences = nil
			if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		_, err = kube.AppsV1().StatefulSets(ns).Create(ctx, c.StatefulSet, metav1.CreateOptions{})
		return err
	})
	if r.Errors > 0 {
		return controllerRun{}, fmt.Errorf("floor: %d errors, first: %s", r.Errors, r.FirstErr)
	}
	createSeconds := time.Since(t0).Seconds()
	complete := stss.wait(ctx, n, readyTimeout(n))
	out := controllerRun{
		Kind:                "floor",
		Databases:           n,
		Concurrency:         conc,
		Complete:            complete,
		Ready:               stss.count(),
		Seconds:             round3(stss.last().Seconds()),
		StatefulSetsSeconds: round3(stss.last().Seconds()),
		CreateSeconds:       round3(createSeconds),
		Curve:               stss.curve(),
		CPU:                 meter.since(cpu0),
	}
	if !complete {
		out.Seconds = round3(readyTimeout(n).Seconds())
	}
	out.ReadyP50, out.ReadyP99 = stss.quantiles()
	return out, nil
}

// tracker records when each object first turned ready.
type tracker struct {
	mu      sync.Mutex
	t0      time.Time
	readyAt map[string]time.Duration
	changed chan struct{}
}

func newTracker() *tracker {
	return &tracker{readyAt: map[string]time.Duration{}, changed: make(chan struct{}, 1)}
}

func (t *tracker) start(t0 time.Time) {
	t.mu.Lock()
	t.t0 = t0
	t.mu.Unlock()
}

func (t *tracker) ready(name string) {
	t.mu.Lock()
	if _, ok := t.readyAt[name]; !ok && !t.t0.IsZero() {
		t.readyAt[name] = time.Since(t.t0)
	}
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.readyAt)
}

// wait waits until n objects are ready or timeout passes; it reports whether they are.
func (t *tracker) wait(ctx context.Context, n int, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for t.count() < n {
		select {
		case <-t.changed:
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func (t *tracker) sorted() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var d []time.Duration
	for _, x := range t.readyAt {
		d = append(d, x)
	}
	slices.Sort(d)
	return d
}

func (t *tracker) last() time.Duration {
	d := t.sorted()
	if len(d) == 0 {
		return 0
	}
	return d[len(d)-1]
}

func (t *tracker) quantiles() (p50, p99 float64) {
	d := t.sorted()
	if len(d) == 0 {
		return 0, 0
	}
	return round3(quantile(d, 0.5).Seconds()), round3(quantile(d, 0.99).Seconds())
}

// curve is (seconds, ready) at most 200 points.
func (t *tracker) curve() [][2]float64 {
	d := t.sorted()
	step := max(1, len(d)/200)
	out := [][2]float64{{0, 0}}
	for i := 0; i < len(d); i += step {
		out = append(out, [2]float64{round3(d[i].Seconds()), float64(i + 1)})
	}
	if len(d) > 0 {
		out = append(out, [2]float64{round3(d[len(d)-1].Seconds()), float64(len(d))})
	}
	return out
}

// watchDatabases feeds t with the Databases of ns whose phase is Ready, watching again from
// the last resourceVersion whenever a watch ends.
func watchDatabases(ctx context.Context, c *dbClient, ns string, t *tracker) error {
	list, err := c.List(ctx, ns, metav1.ListOptions{})
	if err != nil {
		return err
	}
	rv := list.ResourceVersion
	go func() {
		for ctx.Err() == nil {
			w, err := c.Watch(ctx, ns, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				db, ok := ev.Object.(*examplev1.Database)
				if !ok {
					continue
				}
				rv = db.ResourceVersion
				if ev.Type != watch.Bookmark && db.Status.Phase == examplev1.DatabasePhaseReady {
					t.ready(db.Name)
				}
			}
			w.Stop()
		}
	}()
	return nil
}

// watchStatefulSets feeds t with the StatefulSets of ns whose replicas are all ready.
func watchStatefulSets(ctx context.Context, kube kubernetes.Interface, ns string, t *tracker) error {
	list, err := kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	rv := list.ResourceVersion
	go func() {
		for ctx.Err() == nil {
			w, err := kube.AppsV1().StatefulSets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				sts, ok := ev.Object.(*appsv1.StatefulSet)
				if !ok {
					continue
				}
				rv = sts.ResourceVersion
				if ev.Type != watch.Bookmark && sts.Status.ReadyReplicas >= ptr.Deref(sts.Spec.Replicas, 1) {
					t.ready(sts.Name)
				}
			}
			w.Stop()
		}
	}()
	return nil
}

// histogramQuantiles estimates p50, p90 and p99 (milliseconds) of the observations a
// Prometheus histogram (seconds) got between two scrapes, interpolating within buckets as
// histogram_quantile does.
func histogramQuantiles(before, after, name string, labels ...string) *latencies {
	type bucket struct{ le, count float64 }
	read := func(text string) map[float64]float64 {
		m := map[float64]float64{}
		for _, s := range metricSamples(text, name+"_bucket") {
			if !s.has(labels...) {
				continue
			}
			i := strings.Index(s.labels, `le="`)
			if i < 0 {
				continue
			}
			v := s.labels[i+4:]
			v = v[:strings.IndexByte(v, '"')]
			le, err := strconv.ParseFloat(v, 64)
			if v == "+Inf" {
				le, err = math.Inf(1), nil
			}
			if err == nil {
				m[le] += s.value
			}
		}
		return m
	}
	b0, b1 := read(before), read(after)
	var bs []bucket
	for le, c := range b1 {
		bs = append(bs, bucket{le, c - b0[le]})
	}
	if len(bs) == 0 {
		return nil
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	total := bs[len(bs)-1].count
	if total <= 0 {
		return nil
	}
	var capped []string
	q := func(q float64) float64 {
		rank := q * total
		prevLE, prevCount := 0.0, 0.0
		for _, b := range bs {
			if b.count >= rank {
				if math.IsInf(b.le, 1) {
					capped = append(capped, fmt.Sprintf("p%.0f", q*100))
					return prevLE * 1000
				}
				if b.count == prevCount {
					return b.le * 1000
				}
				return round3((prevLE + (b.le-prevLE)*(rank-prevCount)/(b.count-prevCount)) * 1000)
			}
			prevLE, prevCount = b.le, b.count
		}
		return prevLE * 1000
	}
	l := &latencies{P50: q(0.5), P90: q(0.9), P99: q(0.99)}
	l.Capped = capped
	return l
}
