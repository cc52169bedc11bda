package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// newDatabase is the object every target creates: it passes our admission and validation
// (an engine version in the catalog) and the CRD's schema alike.
func newDatabase(name string) *examplev1.Database {
	return &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": "api"}},
		Spec: examplev1.DatabaseSpec{
			Engine:   examplev1.EngineMySQL,
			Version:  "8.4",
			Replicas: ptr.To[int32](1),
			Storage:  "10Gi",
		},
	}
}

var crudVerbs = []string{"create", "get", "update", "patch", "status", "delete"}

// rotate returns ts starting at the round-th element, so no target always goes first.
func rotate(ts []*target, round int) []*target {
	k := round % len(ts)
	return append(append([]*target{}, ts[k:]...), ts[:k]...)
}

func (b *bench) runAPI(ctx context.Context, res *results) error {
	for _, t := range b.targets {
		res.Targets = append(res.Targets, targetInfo{Name: t.Name, Desc: t.Desc, Procs: t.Procs})
	}
	for _, ns := range []string{"bench-list-ours", "bench-list-crd", "bench-list1k-ours", "bench-list1k-crd"} {
		if err := b.ensureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	for _, t := range b.targets {
		for _, ns := range []string{"bench-" + t.Name, "bench-watch-" + t.Name, "bench-warmup-" + t.Name} {
			if err := b.ensureNamespace(ctx, ns); err != nil {
				return err
			}
		}
	}

	logf("warm-up")
	for _, t := range b.targets {
		if err := b.warmup(ctx, t); err != nil {
			return fmt.Errorf("warm-up of %s: %w", t.Name, err)
		}
	}

	if b.o.fanoutOnly {
		return b.runFanout(ctx, res)
	}

	// What the servers burn doing nothing we asked (kube-controller-manager, kwok, leases).
	before := b.cpu.sample()
	time.Sleep(5 * time.Second)
	idle := b.cpu.since(before)
	res.IdleCPU = map[string]float64{}
	for k, v := range idle {
		res.IdleCPU[k] = round3(v / 5)
	}
	logf("idle CPU (cores): %v", res.IdleCPU)

	// Memory first, on servers that have served nothing else yet: a Go process keeps the heap
	// it grew (and its resident pages) long after a burst, which would hide what the objects add.
	if err := b.memoryAndPopulate(ctx, res); err != nil {
		return err
	}

	logf("watch latency, %d watchers", b.sc.Watchers)
	for i, t := range rotate(b.targets, 0) {
		w, err := b.watchLatency(ctx, t)
		if err != nil {
			return fmt.Errorf("watch on %s: %w", t.Name, err)
		}
		res.Watch = append(res.Watch, w)
		logf("  %-11s p50 %6.1f ms  p99 %6.1f ms  (%d events, %d missing) [%d/%d]", t.Name, w.Latency.P50, w.Latency.P99, w.Events, w.Missing, i+1, len(b.targets))
	}

	if err := b.runFanout(ctx, res); err != nil {
		return err
	}

	rounds := max(1, b.sc.Rounds)
	round := 0
	for _, conc := range b.sc.Concurrency {
		n := b.sc.Ops[conc]
		state := map[*target][]*examplev1.Database{}
		for _, t := range b.targets {
			state[t] = make([]*examplev1.Database, n)
		}
		for _, verb := range b.sc.Verbs {
			parts := map[*target][]part{}
			for k := range rounds {
				lo, hi := n*k/rounds, n*(k+1)/rounds
				for _, t := range rotate(b.targets, round) {
					parts[t] = append(parts[t], b.crudPart(ctx, t, verb, conc, state[t], lo, hi))
				}
				round++
			}
			for _, t := range b.targets {
				r := finishRow(t, verb, 0, conc, parts[t])
				res.Rows = append(res.Rows, r)
				logRow(r)
			}
		}
		for _, t := range b.targets { // whatever a row's budget left behind
			if err := t.client.DeleteCollection(ctx, "bench-"+t.Name); err != nil {
				return err
			}
		}
	}

	type listRows struct {
		objects int
		suffix  string
		ops     map[int]int
	}
	lists := []listRows{{b.sc.ListSmall, "list1k", b.sc.ListOps}, {b.sc.ListLarge, "list", b.sc.ListOpsL}}
	if b.sc.NoList {
		lists = nil
	}
	for _, list := range lists {
		for _, conc := range b.sc.Concurrency {
			n := list.ops[conc]
			parts := map[*target][]part{}
			for k := range rounds {
				lo, hi := n*k/rounds, n*(k+1)/rounds
				if hi == lo {
					continue
				}
				for _, t := range rotate(b.targets, round) {
					ns := "bench-" + list.suffix + "-crd"
					if t.ours {
						ns = "bench-" + list.suffix + "-ours"
					}
					parts[t] = append(parts[t], b.listPart(ctx, t, ns, list.objects, conc, hi-lo))
				}
				round++
			}
			for _, t := range b.targets {
				r := finishRow(t, "list", list.objects, conc, parts[t])
				res.Rows = append(res.Rows, r)
				logRow(r)
			}
		}
	}

	if b.o.profileDir != "" {
		if err := b.profileAPI(ctx); err != nil {
			return err
		}
	}

	logf("deleting the LIST objects")
	for _, ns := range []string{"bench-list-ours", "bench-list1k-ours"} {
		if err := deleteAll(ctx, b.direct, ns); err != nil {
			return fmt.Errorf("deleting %s: %w", ns, err)
		}
	}
	for _, ns := range []string{"bench-list-crd", "bench-list1k-crd"} {
		if err := deleteAll(ctx, b.crd, ns); err != nil {
			return fmt.Errorf("deleting %s: %w", ns, err)
		}
	}
	return nil
}

// profileAPI records CPU profiles of our server and of kube-apiserver under steady loads,
// after the measured rows: the CRUD cycle (create, get, update, patch, status, delete of each
// object) at concurrency 8 on our server's port, through kube-apiserver and on the CRD, and
// GET of one object on our server's port, through kube-apiserver and on the CRD, and LIST of
// the large namespaces through kube-apiserver (ours in protobuf, and the CRD).
func (b *bench) profileAPI(ctx context.Context) error {
	if err := os.MkdirAll(b.o.profileDir, 0o755); err != nil {
		return err
	}
	const seconds = 15
	for _, p := range []struct {
		file      string
		t         *target
		list, get bool
	}{
		{"crud-direct", b.direct, false, false},
		{"crud-via-kube", b.targets[1], false, false},
		{"crud-crd", b.crd, false, false},
		{"get-direct", b.direct, false, true},
		{"get-via-kube", b.targets[1], false, true},
		{"get-crd", b.crd, false, true},
		{"list-via-kube", b.targets[1], true, false},
		{"list-crd", b.crd, true, false},
	} {
		if p.get {
			if _, err := p.t.client.Create(ctx, "bench-"+p.t.Name, newDatabase("p-get")); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		ns := "bench-" + p.t.Name
		var k atomic.Int64
		if err := b.profileUnder(ctx, p.file, seconds, 8, func(ctx context.Context) error {
			if p.get {
				_, err := p.t.client.Get(ctx, ns, "p-get")
				return err
			}
			if p.list {
				ns := "bench-list-crd"
				if p.t.ours {
					ns = "bench-list-ours"
				}
				_, err := p.t.client.List(ctx, ns, metav1.ListOptions{})
				return err
			}
			name := fmt.Sprintf("p-%07d", k.Add(1))
			o, err := p.t.client.Create(ctx, ns, newDatabase(name))
			if err != nil {
				return err
			}
			if _, err := p.t.client.Get(ctx, ns, name); err != nil {
				return err
			}
			o.Spec.Replicas = ptr.To[int32](2)
			if o, err = p.t.client.Update(ctx, o); err != nil {
				return err
			}
			if o, err = p.t.client.MergePatch(ctx, ns, name, []byte(`{"spec":{"replicas":3}}`)); err != nil {
				return err
			}
			o.Status = examplev1.DatabaseStatus{Phase: examplev1.DatabasePhaseReady, ReadyReplicas: 3}
			if _, err = p.t.client.UpdateStatus(ctx, o); err != nil {
				return err
			}
			return p.t.client.Delete(ctx, ns, name)
		}); err != nil {
			return err
		}
	}
	return nil
}

// profileUnder records CPU profiles of seconds of our server and of kube-apiserver, as
// apiserver-<file>.pprof and kube-apiserver-<file>.pprof in the profile directory, while conc
// clients run op again and again; it returns an error when a profile could not be written.
func (b *bench) profileUnder(ctx context.Context, file string, seconds, conc int, op func(ctx context.Context) error) error {
	logf("profiling: %s", file)
	pctx, cancel := context.WithCancel(ctx)
	waitOurs := profileCPU(ctx, b.adminDirect, nil, b.adminDirect.Host, filepath.Join(b.o.profileDir, "apiserver-"+file+".pprof"), seconds)
	waitKube := profileCPU(ctx, b.cluster.AdminConfig, nil, b.cluster.AdminConfig.Host, filepath.Join(b.o.profileDir, "kube-apiserver-"+file+".pprof"), seconds)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(pctx, conc, math.MaxInt32, time.Hour, func(ctx context.Context, _ int) error { return op(ctx) })
	}()
	err := errors.Join(waitOurs(), waitKube())
	cancel()
	<-done
	if err != nil {
		return fmt.Errorf("profile %s: %w", file, err)
	}
	return nil
}

func logRow(r row) {
	what := r.Verb
	if r.Objects > 0 {
		what = fmt.Sprintf("%s %d", r.Verb, r.Objects)
	}
	errs := ""
	if r.Errors > 0 {
		errs = fmt.Sprintf("  %d errors: %s", r.Errors, r.FirstError)
	}
	logf("  %-11s %-10s c=%-2d %5d ops %8.1f/s  p50 %7.1f ms  p99 %7.1f ms%s",
		r.Target, what, r.Concurrency, r.Ops, r.Throughput, r.Latency.P50, r.Latency.P99, errs)
}

func (b *bench) warmup(ctx context.Context, t *target) error {
	ns := "bench-warmup-" + t.Name
	r := run(ctx, 4, 20, time.Minute, func(ctx context.Context, i int) error {
		if _, err := t.client.Create(ctx, ns, newDatabase(fmt.Sprintf("w-%03d", i))); err != nil {
			return err
		}
		_, err := t.client.Get(ctx, ns, fmt.Sprintf("w-%03d", i))
		return err
	})
	if r.Errors > 0 {
		return errors.New(r.FirstErr)
	}
	if _, err := t.client.List(ctx, ns, metav1.ListOptions{}); err != nil {
		return err
	}
	return t.client.DeleteCollection(ctx, ns)
}

// part is one chunk of a row: the rows are run in rounds, each round going through every
// target (in rotated order), so that a burst of load from elsewhere on the machine hits every
// target alike instead of one row.
type part struct {
	r   runResult
	cpu map[string]float64
}

// measurePart runs op for i in [0, n) and records the servers' CPU time meanwhile.
func (b *bench) measurePart(ctx context.Context, conc, n int, op func(context.Context, int) error) part {
	before := b.cpu.sample()
	r := run(ctx, conc, n, time.Duration(b.sc.RowBudget), op)
	return part{r: r, cpu: b.cpu.since(before)}
}

// finishRow merges the parts of one row of the table.
func finishRow(t *target, verb string, objects, conc int, parts []part) row {
	out := row{Target: t.Name, Verb: verb, Objects: objects, Concurrency: conc, CPU: map[string]float64{}}
	var lat []time.Duration
	var wall time.Duration
	for _, p := range parts {
		out.Ops += p.r.Ops
		out.Errors += p.r.Errors
		if out.FirstError == "" {
			out.FirstError = p.r.FirstErr
		}
		wall += p.r.Wall
		lat = append(lat, p.r.Latencies...)
		for k, v := range p.cpu {
			out.CPU[k] = round3(out.CPU[k] + v)
		}
	}
	out.Seconds = round3(wall.Seconds())
	out.Latency = summarise(lat)
	if wall > 0 {
		out.Throughput = round3(float64(out.Ops-out.Errors) / wall.Seconds())
	}
	if ok := out.Ops - out.Errors; ok > 0 {
		var sum, all float64
		for _, p := range t.Procs {
			sum += out.CPU[p]
		}
		for _, v := range out.CPU {
			all += v
		}
		out.ServerCPUPer1k = round3(sum / float64(ok) * 1000)
		out.AllCPUPer1k = round3(all / float64(ok) * 1000)
	}
	return out
}

// crudPart runs one verb on the objects [lo, hi) of state (made by the create rows).
func (b *bench) crudPart(ctx context.Context, t *target, verb string, conc int, state []*examplev1.Database, lo, hi int) part {
	ns := "bench-" + t.Name
	name := func(i int) string { return fmt.Sprintf("c%d-%05d", conc, i) }
	if verb == "create" {
		return b.measurePart(ctx, conc, hi-lo, func(ctx context.Context, k int) error {
			i := lo + k
			out, err := t.client.Create(ctx, ns, newDatabase(name(i)))
			if err == nil {
				state[i] = out
			}
			return err
		})
	}
	// The other verbs work on the objects the create rows made, each by one worker at a time.
	var idx []int
	for i := lo; i < hi; i++ {
		if state[i] != nil {
			idx = append(idx, i)
		}
	}
	var op func(ctx context.Context, i int) error
	switch verb {
	case "get":
		op = func(ctx context.Context, k int) error {
			_, err := t.client.Get(ctx, ns, name(idx[k]))
			return err
		}
	case "update": // spec.replicas 1 -> 2, a full PUT with the resourceVersion of the last write
		op = func(ctx context.Context, k int) error {
			o := state[idx[k]].DeepCopy()
			o.Spec.Replicas = ptr.To[int32](2)
			out, err := t.client.Update(ctx, o)
			if err == nil {
				state[idx[k]] = out
			}
			return err
		}
	case "patch": // a JSON merge patch of spec.replicas
		patch := []byte(`{"spec":{"replicas":3}}`)
		op = func(ctx context.Context, k int) error {
			out, err := t.client.MergePatch(ctx, ns, name(idx[k]), patch)
			if err == nil {
				state[idx[k]] = out
			}
			return err
		}
	case "status": // PUT databases/status, as a controller reports
		op = func(ctx context.Context, k int) error {
			o := state[idx[k]].DeepCopy()
			o.Status = examplev1.DatabaseStatus{Phase: examplev1.DatabasePhaseReady, ReadyReplicas: 3}
			out, err := t.client.UpdateStatus(ctx, o)
			if err == nil {
				state[idx[k]] = out
			}
			return err
		}
	case "delete":
		op = func(ctx context.Context, k int) error {
			err := t.client.Delete(ctx, ns, name(idx[k]))
			if err == nil {
				state[idx[k]] = nil
			}
			return err
		}
	}
	return b.measurePart(ctx, conc, len(idx), op)
}

func (b *bench) listPart(ctx context.Context, t *target, ns string, objects, conc, n int) part {
	return b.measurePart(ctx, conc, n, func(ctx context.Context, _ int) error {
		l, err := t.client.List(ctx, ns, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(l.Items) != objects {
			return fmt.Errorf("listed %d objects, want %d", len(l.Items), objects)
		}
		return nil
	})
}

// populate creates the objects [from, to) in ns at concurrency 32.
func populate(ctx context.Context, t *target, ns string, from, to int) error {
	start := time.Now()
	r := run(ctx, 32, to-from, time.Hour, func(ctx context.Context, i int) error {
		_, err := t.client.Create(ctx, ns, newDatabase(fmt.Sprintf("l-%06d", from+i)))
		return err
	})
	if r.Errors > 0 {
		return fmt.Errorf("populating %s through %s: %d errors, first: %s", ns, t.Name, r.Errors, r.FirstErr)
	}
	logf("  %d objects in %s through %s in %v (%.0f/s)", to-from, ns, t.Name, time.Since(start).Round(100*time.Millisecond),
		float64(to-from)/time.Since(start).Seconds())
	return nil
}

// memoryAndPopulate fills the LIST namespaces and measures what holding ListLarge objects
// costs: our server's memory for ours (created on its own port, so kube-apiserver does not
// see them), then kube-apiserver's for the CRD's.
func (b *bench) memoryAndPopulate(ctx context.Context, res *results) error {
	m, err := b.memoryHolding(ctx, b.sc.ListLarge, "bench-list-ours", "bench-list-crd")
	if err != nil {
		return err
	}
	res.Memory = m
	if err := b.memorySettle(ctx, m); err != nil {
		return err
	}

	if err := populate(ctx, b.direct, "bench-list1k-ours", 0, b.sc.ListSmall); err != nil {
		return err
	}
	return populate(ctx, b.crd, "bench-list1k-crd", 0, b.sc.ListSmall)
}

// memoryHolding measures what holding large objects costs: our server's memory for
// Databases created in nsOurs on its own port (kube-apiserver does not see them), then
// kube-apiserver's for as many objects of the CRD in nsCRD.
func (b *bench) memoryHolding(ctx context.Context, large int, nsOurs, nsCRD string) (*memoryResult, error) {
	settle := b.settleTime()
	logf("memory: holding %d objects", large)
	if err := sleep(ctx, settle); err != nil {
		return nil, err
	}
	b.collectGarbage(ctx, "")
	oursBefore, kubeBefore := b.memSample(ctx, procOurs), b.memSample(ctx, procKube)
	if err := populate(ctx, b.direct, nsOurs, 0, large); err != nil {
		return nil, err
	}
	if err := sleep(ctx, settle); err != nil {
		return nil, err
	}
	oursAfter, kubeMid := b.memSample(ctx, procOurs), b.memSample(ctx, procKube)
	if err := populate(ctx, b.crd, nsCRD, 0, large); err != nil {
		return nil, err
	}
	if err := sleep(ctx, settle); err != nil {
		return nil, err
	}
	kubeAfter, oursEnd := b.memSample(ctx, procKube), b.memSample(ctx, procOurs)
	if b.o.profileDir != "" {
		b.collectGarbage(ctx, fmt.Sprintf("heap-%d", large))
	}

	m := &memoryResult{
		Objects:    large,
		OursBefore: oursBefore,
		OursAfter:  oursAfter,
		OursEnd:    oursEnd,
		KubeBefore: kubeBefore,
		KubeMid:    kubeMid,
		KubeAfter:  kubeAfter,
	}
	m.OursDeltaMiB, m.OursHeapDelta = oursAfter.minus(oursBefore)
	m.KubeDeltaMiB, m.KubeHeapDelta = kubeAfter.minus(kubeMid)
	m.Ratio = rssRatio(m.OursDeltaMiB, m.KubeDeltaMiB)
	logf("memory: our server %.0f -> %.0f MiB (+%.0f), kube-apiserver %.0f -> %.0f MiB (+%.0f) for %d objects: ratio %.2f",
		oursBefore.RSSMiB, oursAfter.RSSMiB, m.OursDeltaMiB, kubeMid.RSSMiB, kubeAfter.RSSMiB, m.KubeDeltaMiB, large, m.Ratio)
	return m, nil
}

// memorySettle measures both servers again once the creates m measured are history, and fills
// in m's settled samples, deltas (from the same baselines) and ratio.
func (b *bench) memorySettle(ctx context.Context, m *memoryResult) error {
	settle := b.settleTime()
	// What the creates left behind besides the objects: the watch caches' snapshots of their
	// history (kept until etcd is compacted past it, which the servers' own compactors do
	// every 5 minutes) and the garbage the Go heap grew for. Compacting etcd now, and
	// collecting, leaves what holding the objects costs.
	rev, err := compactEtcd(ctx, b.cluster.EtcdURL)
	if err != nil {
		return err
	}
	logf("memory: etcd compacted to revision %d; waiting for the watch caches to drop their snapshots", rev)
	if err := sleep(ctx, cacherCompactorPoll); err != nil {
		return err
	}
	b.collectGarbage(ctx, fmt.Sprintf("heap-%d-settled", m.Objects))
	if err := sleep(ctx, settle); err != nil {
		return err
	}
	oursSettled, kubeSettled := b.memSample(ctx, procOurs), b.memSample(ctx, procKube)

	m.OursSettled, m.KubeSettled = oursSettled, kubeSettled
	m.OursSettledDeltaMiB, m.OursSettledHeapDelta = oursSettled.minus(m.OursBefore)
	m.KubeSettledDeltaMiB, m.KubeSettledHeapDelta = kubeSettled.minus(m.KubeMid)
	m.SettledRatio = rssRatio(m.OursSettledDeltaMiB, m.KubeSettledDeltaMiB)
	logf("memory: settled, our server +%.0f MiB (heap +%.0f), kube-apiserver +%.0f MiB (heap +%.0f): ratio %.2f",
		m.OursSettledDeltaMiB, m.OursSettledHeapDelta, m.KubeSettledDeltaMiB, m.KubeSettledHeapDelta, m.SettledRatio)
	return nil
}

// settleTime is how long a server is left alone before its memory is read: 10 s (3 s with
// -quick).
func (b *bench) settleTime() time.Duration {
	if b.o.quick {
		return 3 * time.Second
	}
	return 10 * time.Second
}

// sleep waits d, or returns ctx's error when it ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// cacherCompactorPoll is how long a watch cache takes at most to drop the snapshots older
// than etcd's compaction revision: its compactor's poll period in k8s.io/apiserver (15 s),
// and a margin.
const cacherCompactorPoll = 20 * time.Second

// collectGarbage runs a garbage collection in both servers; with -profile, it writes their
// heap profiles after it as apiserver-<name>.pprof and kube-apiserver-<name>.pprof.
func (b *bench) collectGarbage(ctx context.Context, name string) {
	for _, p := range []struct {
		cfg  *rest.Config
		file string
	}{{b.adminDirect, "apiserver"}, {b.cluster.AdminConfig, "kube-apiserver"}} {
		path := ""
		if b.o.profileDir != "" && name != "" {
			path = filepath.Join(b.o.profileDir, p.file+"-"+name+".pprof")
		}
		if err := profileHeap(ctx, p.cfg, path); err != nil {
			logf("memory: garbage collection in %s: %v", p.file, err)
		}
	}
}

// minus is what s added to base: resident memory and Go heap in use, in MiB.
func (s memSample) minus(base memSample) (rssMiB, heapMiB float64) {
	return round3(s.RSSMiB - base.RSSMiB), round3(s.HeapInuseMiB - base.HeapInuseMiB)
}

// rssRatio is ours/kube, the memory goals' ratio (0 when kube-apiserver added nothing).
func rssRatio(ours, kube float64) float64 {
	if kube <= 0 {
		return 0
	}
	return round3(ours / kube)
}

// memSample reads a server's resident memory (the median of three readings a second apart)
// and its Go heap in use from its /metrics.
func (b *bench) memSample(ctx context.Context, proc string) memSample {
	pid := b.cpu[proc]
	var rss []int64
	var hwm int64
	for i := range 3 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		r, h, err := procMem(pid)
		if err == nil {
			rss = append(rss, r)
			hwm = h
		}
	}
	sort.Slice(rss, func(i, j int) bool { return rss[i] < rss[j] })
	s := memSample{HWMMiB: mib(hwm)}
	if len(rss) > 0 {
		s.RSSMiB = mib(rss[len(rss)/2])
	}
	cfg := b.cluster.AdminConfig
	if proc == procOurs {
		cfg = b.adminDirect
	}
	if text, err := metricsText(ctx, cfg); err == nil {
		s.HeapInuseMiB = mib(int64(metricValue(text, "go_memstats_heap_inuse_bytes")))
	}
	return s
}

var metricLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)`)

// metricValue sums the samples of name whose labels contain every one of labels
// (`key="value"`), in Prometheus text.
func metricValue(text, name string, labels ...string) float64 {
	var sum float64
	for _, s := range metricSamples(text, name) {
		if s.has(labels...) {
			sum += s.value
		}
	}
	return sum
}

type metricSample struct {
	labels string
	value  float64
}

func (s metricSample) has(labels ...string) bool {
	for _, l := range labels {
		if !containsLabel(s.labels, l) {
			return false
		}
	}
	return true
}

func containsLabel(set, label string) bool {
	for i := 0; i+len(label) <= len(set); i++ {
		if set[i:i+len(label)] == label && (i == 0 || set[i-1] == '{' || set[i-1] == ',') {
			return true
		}
	}
	return false
}

func metricSamples(text, name string) []metricSample {
	var out []metricSample
	start := 0
	for start < len(text) {
		end := start
		for end < len(text) && text[end] != '\n' {
			end++
		}
		line := text[start:end]
		start = end + 1
		if len(line) < len(name) || line[:len(name)] != name {
			continue
		}
		m := metricLine.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		out = append(out, metricSample{labels: m[2], value: v})
	}
	return out
}

// watchLatency starts the watchers on an empty namespace, creates WatchWrites objects one at
// a time, 25 ms apart, and records for every watcher the time from the start of each create
// to the arrival of its ADDED event.
func (b *bench) watchLatency(ctx context.Context, t *target) (watchRow, error) {
	ns := "bench-watch-" + t.Name
	writes, watchers := b.sc.WatchWrites, b.sc.Watchers
	list, err := t.client.List(ctx, ns, metav1.ListOptions{})
	if err != nil {
		return watchRow{}, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sent sync.Map // name -> time.Time
	lat := make([][]time.Duration, watchers)
	var wg sync.WaitGroup
	for w := range watchers {
		wi, err := t.client.Watch(wctx, ns, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			return watchRow{}, err
		}
		wg.Go(func() {
			defer wi.Stop()
			for ev := range wi.ResultChan() {
				if ev.Type != watch.Added {
					continue
				}
				db, ok := ev.Object.(*examplev1.Database)
				if !ok {
					continue
				}
				if t0, ok := sent.Load(db.Name); ok {
					lat[w] = append(lat[w], time.Since(t0.(time.Time)))
				}
				if len(lat[w]) == writes {
					return
				}
			}
		})
	}
	time.Sleep(500 * time.Millisecond) // every watch established
	tick := time.NewTicker(25 * time.Millisecond)
	var writeErr error
	for k := range writes {
		<-tick.C
		name := fmt.Sprintf("w-%05d", k)
		sent.Store(name, time.Now())
		if _, err := t.client.Create(ctx, ns, newDatabase(name)); err != nil && writeErr == nil {
			writeErr = err
		}
	}
	tick.Stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cancel()
		<-done
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	if err := t.client.DeleteCollection(ctx, ns); err != nil {
		return watchRow{}, err
	}
	if writeErr != nil {
		return watchRow{}, writeErr
	}
	return watchRow{
		Target:   t.Name,
		Watchers: watchers,
		Writes:   writes,
		Events:   len(all),
		Missing:  watchers*writes - len(all),
		Latency:  summarise(all),
	}, nil
}
