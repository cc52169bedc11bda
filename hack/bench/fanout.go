package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// fanoutRow is one fan-out measurement: Watchers watches of one kind on an empty namespace,
// then Creates objects created one at a time (each after every watcher has seen the one
// before, or a timeout), timing each create and each event's delivery to each watcher.
type fanoutRow struct {
	Target   string `json:"target"`
	Watchers int    `json:"watchers"`
	Creates  int    `json:"creates"`
	// Events is how many ADDED events of the creates arrived, Lost how many of
	// Watchers×Creates did not (every watcher must see every create).
	Events int `json:"events"`
	Lost   int `json:"lost"`
	// Create is the latency of the creates, Delivery from the start of a create to its event
	// at a watcher.
	Create   latencies `json:"create"`
	Delivery latencies `json:"delivery"`
	// WatchStart is how long opening all the watches took (seconds).
	WatchStart float64 `json:"watchStartSeconds"`
	// CPU is the CPU seconds of each process during the creates.
	CPU map[string]float64 `json:"cpu,omitempty"`
	// ServerCreateMs is the mean create latency the serving API server measured itself
	// (apiserver_request_duration_seconds: ours for Databases of example.com,
	// kube-apiserver's otherwise), APFWaitMs the mean wait in its priority and fairness
	// queues of the requests it executed meanwhile.
	ServerCreateMs float64 `json:"serverCreateMs,omitempty"`
	APFWaitMs      float64 `json:"apfWaitMs,omitempty"`
	Error          string  `json:"error,omitempty"`
}

// fanoutKind is what the fan-out rows create and watch: Databases of one target, or ConfigMaps.
type fanoutKind struct {
	name string
	ours bool // served by our server
	// create creates the object name in ns; watch opens one watch of ns from rv; list returns
	// ns's resourceVersion; clear deletes every object of ns.
	create func(ctx context.Context, ns, name string) error
	watch  func(ctx context.Context, ns, rv string) (watch.Interface, error)
	list   func(ctx context.Context, ns string) (string, error)
	clear  func(ctx context.Context, ns string) error
}

// The fan-out rows run as an ordinary user (impersonated by the admin), allowed by RBAC, as a
// user's watches are: not system:masters, which both servers exempt from priority and fairness
// and our server authorizes without asking kube-apiserver.
var fanoutUser, fanoutGroup = "bench-fanout", "bench-fanout"

// fanoutTable makes the watchers ask for server-side tables, as kubectl get -w does.
var fanoutTable bool

// tableWatch opens req as a watch from rv asking for Table rows (JSON, as kubectl get -w
// asks), and returns each row's object as a PartialObjectMetadata event.
func tableWatch(ctx context.Context, req *rest.Request, rv string) (watch.Interface, error) {
	body, err := req.Param("watch", "true").Param("resourceVersion", rv).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Stream(ctx)
	if err != nil {
		return nil, err
	}
	ch := make(chan watch.Event, 100)
	w := watch.NewProxyWatcher(ch)
	go func() {
		defer close(ch)
		defer body.Close()
		dec := json.NewDecoder(body)
		for {
			var ev struct {
				Type   watch.EventType
				Object struct {
					Rows []struct {
						Object metav1.PartialObjectMetadata `json:"object"`
					} `json:"rows"`
				}
			}
			if err := dec.Decode(&ev); err != nil {
				return
			}
			for i := range ev.Object.Rows {
				select {
				case ch <- watch.Event{Type: ev.Type, Object: &ev.Object.Rows[i].Object}:
				case <-w.StopChan():
					return
				}
			}
		}
	}()
	return w, nil
}

// fanoutOwnConns gives every watcher its own connection to the server, as separate
// processes (kubectl get -w) have.
var fanoutOwnConns bool

// ownConnection returns a copy of cfg whose transport is not shared with any other client:
// client-go caches transports by TLS configuration, and a Proxy function makes it build a new
// one (the function says "no proxy").
func ownConnection(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	if fanoutUser != "" {
		c.Impersonate = rest.ImpersonationConfig{UserName: fanoutUser, Groups: []string{fanoutGroup, "system:authenticated"}}
	}
	c.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	c.QPS = -1
	c.Burst = 0
	c.WarningHandler = rest.NoWarnings{}
	c.UserAgent = "database-bench"
	return c
}

// databaseFanoutKind drives a Database target: the creates on one connection, all the
// watches on another (HTTP/2 opens more as the server's stream limit requires).
func databaseFanoutKind(base *rest.Config, t *target, contentType string) (fanoutKind, error) {
	gv := examplev1.SchemeGroupVersion
	if !t.ours {
		gv = crdGroupVersion
	}
	writer, err := newDBClient(ownConnection(base), gv, contentType)
	if err != nil {
		return fanoutKind{}, err
	}
	watcher, err := newDBClient(ownConnection(base), gv, contentType)
	if err != nil {
		return fanoutKind{}, err
	}
	return fanoutKind{
		name: t.Name,
		ours: t.ours,
		create: func(ctx context.Context, ns, name string) error {
			_, err := writer.Create(ctx, ns, newDatabase(name))
			return err
		},
		watch: func(ctx context.Context, ns, rv string) (watch.Interface, error) {
			w := watcher
			if fanoutOwnConns {
				if w, err = newDBClient(ownConnection(base), gv, contentType); err != nil {
					return nil, err
				}
			}
			if fanoutTable {
				return tableWatch(ctx, w.rc.Get().Namespace(ns).Resource("databases"), rv)
			}
			return w.Watch(ctx, ns, metav1.ListOptions{ResourceVersion: rv})
		},
		list: func(ctx context.Context, ns string) (string, error) {
			l, err := writer.List(ctx, ns, metav1.ListOptions{})
			if err != nil {
				return "", err
			}
			return l.ResourceVersion, nil
		},
		clear: writer.DeleteCollection,
	}, nil
}

// configMapFanoutKind drives ConfigMaps through kube-apiserver (protobuf, client-go's
// clientset): the built-in kind the fan-out rows compare against.
func configMapFanoutKind(base *rest.Config) (fanoutKind, error) {
	wc, ww := ownConnection(base), ownConnection(base)
	for _, c := range []*rest.Config{wc, ww} {
		c.ContentType = contentProtobuf
		c.AcceptContentTypes = contentProtobuf
	}
	writer, err := kubernetes.NewForConfig(wc)
	if err != nil {
		return fanoutKind{}, err
	}
	watcher, err := kubernetes.NewForConfig(ww)
	if err != nil {
		return fanoutKind{}, err
	}
	return fanoutKind{
		name: "configmaps",
		create: func(ctx context.Context, ns, name string) error {
			_, err := writer.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": "api"}},
				Data:       map[string]string{"engine": "mysql", "version": "8.4", "replicas": "1", "storage": "10Gi"},
			}, metav1.CreateOptions{})
			return err
		},
		watch: func(ctx context.Context, ns, rv string) (watch.Interface, error) {
			w := watcher
			if fanoutOwnConns {
				if w, err = kubernetes.NewForConfig(ww); err != nil {
					return nil, err
				}
			}
			if fanoutTable {
				return tableWatch(ctx, w.CoreV1().RESTClient().Get().Namespace(ns).Resource("configmaps"), rv)
			}
			return w.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		},
		list: func(ctx context.Context, ns string) (string, error) {
			l, err := writer.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return "", err
			}
			return l.ResourceVersion, nil
		},
		clear: func(ctx context.Context, ns string) error {
			return writer.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "bench=api"})
		},
	}, nil
}

// fanoutTally counts the events of each create, by its index, and signals when one has
// reached every watcher.
type fanoutTally struct {
	watchers int
	mu       sync.Mutex
	started  map[string]time.Time // name -> start of its create
	index    map[string]int
	seen     []int
	done     []chan struct{}
	delivery [][]time.Duration // by watcher
	events   atomic.Int64
}

func newFanoutTally(watchers, creates int) *fanoutTally {
	t := &fanoutTally{
		watchers: watchers,
		started:  map[string]time.Time{},
		index:    map[string]int{},
		seen:     make([]int, creates),
		done:     make([]chan struct{}, creates),
		delivery: make([][]time.Duration, watchers),
	}
	for i := range t.done {
		t.done[i] = make(chan struct{})
	}
	return t
}

// start records that the create of name, the i-th, starts now.
func (t *fanoutTally) start(i int, name string) {
	t.mu.Lock()
	t.started[name] = time.Now()
	t.index[name] = i
	t.mu.Unlock()
}

// seenBy records the arrival of name's event at watcher w at time at; events of names not
// started (none should arrive) are ignored.
func (t *fanoutTally) seenBy(w int, name string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t0, ok := t.started[name]
	if !ok {
		return
	}
	i := t.index[name]
	t.delivery[w] = append(t.delivery[w], at.Sub(t0))
	t.events.Add(1)
	t.seen[i]++
	if t.seen[i] == t.watchers {
		close(t.done[i])
	}
}

func (t *fanoutTally) all() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	for _, d := range t.delivery {
		out = append(out, d...)
	}
	return out
}

// fanout opens watchers watches of k on the empty namespace ns and creates creates objects one
// at a time, each after the one before reached every watcher (or eventTimeout passed).
func (b *bench) fanout(ctx context.Context, k fanoutKind, ns string, watchers, creates int, eventTimeout time.Duration) fanoutRow {
	row := fanoutRow{Target: k.name, Watchers: watchers, Creates: creates}
	fail := func(err error) fanoutRow {
		row.Error = err.Error()
		if cerr := k.clear(ctx, ns); cerr != nil { // the next row starts from an empty namespace
			row.Error += "; clearing the namespace: " + cerr.Error()
		}
		return row
	}
	rv, err := k.list(ctx, ns)
	if err != nil {
		return fail(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tally := newFanoutTally(watchers, creates)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	// Open the watches 16 at a time; each from the same resourceVersion, so a watch that is
	// established late still sees every create.
	start := time.Now()
	ws := make([]watch.Interface, watchers)
	var openErr atomic.Value
	r := run(ctx, 16, watchers, 10*time.Minute, func(ctx context.Context, i int) error {
		w, err := k.watch(wctx, ns, rv)
		if err != nil {
			openErr.CompareAndSwap(nil, err)
			return err
		}
		ws[i] = w
		return nil
	})
	row.WatchStart = round3(time.Since(start).Seconds())
	for i, w := range ws {
		if w == nil {
			continue
		}
		wg.Go(func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				if ev.Type != watch.Added {
					continue
				}
				at := time.Now()
				if m, err := apimeta.Accessor(ev.Object); err == nil {
					tally.seenBy(i, m.GetName(), at)
				}
			}
		})
	}
	if r.Errors > 0 {
		return fail(fmt.Errorf("%d of %d watches did not open: %v", r.Errors, watchers, openErr.Load()))
	}

	cfg, resource := b.cluster.AdminConfig, []string{`resource="configmaps"`}
	if k.ours {
		cfg, resource = b.adminDirect, []string{`resource="databases"`, `group="example.com"`}
	} else if k.name == b.crd.Name {
		resource = []string{`resource="databases"`, `group="crd.example.com"`}
	}
	metricsBefore, _ := metricsText(ctx, cfg)
	var waitProfile func() error
	if b.o.profileDir != "" {
		base := filepath.Join(b.o.profileDir, fmt.Sprintf("fanout-%s-%d", k.name, watchers))
		waitOurs := profileCPU(ctx, b.adminDirect, nil, b.adminDirect.Host, base+"-apiserver.pprof", 10)
		waitKube := profileCPU(ctx, b.cluster.AdminConfig, nil, b.cluster.AdminConfig.Host, base+"-kube-apiserver.pprof", 10)
		waitProfile = func() error { return errors.Join(waitOurs(), waitKube()) }
	}
	before := b.cpu.sample()
	var createLat []time.Duration
	for i := range creates {
		name := fmt.Sprintf("f-%05d", i)
		tally.start(i, name)
		t0 := time.Now()
		if err := k.create(ctx, ns, name); err != nil {
			return fail(fmt.Errorf("create %s: %w", name, err))
		}
		createLat = append(createLat, time.Since(t0))
		select {
		case <-tally.done[i]:
		case <-time.After(eventTimeout):
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
	row.CPU = b.cpu.since(before)
	if waitProfile != nil {
		if err := waitProfile(); err != nil {
			logf("fan-out profile: %v", err)
		}
	}
	if after, err := metricsText(ctx, cfg); err == nil {
		post := append([]string{`verb="POST"`}, resource...)
		d := func(name string, labels ...string) float64 {
			return metricValue(after, name, labels...) - metricValue(metricsBefore, name, labels...)
		}
		if n := d("apiserver_request_duration_seconds_count", post...); n > 0 {
			row.ServerCreateMs = round3(d("apiserver_request_duration_seconds_sum", post...) / n * 1000)
		}
		if n := d("apiserver_flowcontrol_request_wait_duration_seconds_count", `execute="true"`); n > 0 {
			row.APFWaitMs = round3(d("apiserver_flowcontrol_request_wait_duration_seconds_sum", `execute="true"`) / n * 1000)
		}
	}
	for p, v := range row.CPU {
		row.CPU[p] = round3(v)
	}
	cancel()
	wg.Wait()
	row.Events = int(tally.events.Load())
	row.Lost = watchers*creates - row.Events
	row.Create = summarise(createLat)
	row.Delivery = summarise(tally.all())
	if err := k.clear(ctx, ns); err != nil {
		return fail(err)
	}
	return row
}

// runFanout measures every fan-out kind at each watcher count of the scale, the kinds in
// rotated order at each count.
func (b *bench) runFanout(ctx context.Context, res *results) error {
	if len(b.sc.FanoutWatchers) == 0 {
		return nil
	}
	admin := b.cluster.AdminConfig
	var kinds []fanoutKind
	for _, t := range []struct {
		t  *target
		ct string
		c  *rest.Config
	}{
		{b.targets[1], contentProtobuf, admin},
		{b.crd, contentJSON, admin},
		{b.direct, contentProtobuf, b.adminDirect},
	} {
		k, err := databaseFanoutKind(t.c, t.t, t.ct)
		if err != nil {
			return err
		}
		kinds = append(kinds, k)
	}
	cm, err := configMapFanoutKind(admin)
	if err != nil {
		return err
	}
	kinds = append(kinds, cm)
	if err := b.fanoutRBAC(ctx); err != nil {
		return err
	}
	for _, k := range kinds {
		if err := b.ensureNamespace(ctx, "bench-fanout-"+k.name); err != nil {
			return err
		}
	}
	for n, watchers := range b.sc.FanoutWatchers {
		logf("fan-out: %d watchers, %d creates", watchers, b.sc.FanoutCreates)
		order := append(append([]fanoutKind{}, kinds[n%len(kinds):]...), kinds[:n%len(kinds)]...)
		for _, k := range order {
			r := b.fanout(ctx, k, "bench-fanout-"+k.name, watchers, b.sc.FanoutCreates, 10*time.Second)
			res.Fanout = append(res.Fanout, r)
			logf("  %-11s w=%-5d create p50 %7.1f p99 %7.1f ms  delivery p50 %7.1f p99 %7.1f ms  events %d lost %d  (watches open in %.1f s; server's create mean %.1f ms, APF wait %.2f ms; CPU %v)%s",
				r.Target, r.Watchers, r.Create.P50, r.Create.P99, r.Delivery.P50, r.Delivery.P99, r.Events, r.Lost, r.WatchStart, r.ServerCreateMs, r.APFWaitMs, r.CPU, errSuffix(r.Error))
		}
	}
	return nil
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return "  error: " + e
}

// fanoutRBAC lets the fan-out user read, watch, create and delete Databases of both groups
// and ConfigMaps.
func (b *bench) fanoutRBAC(ctx context.Context) error {
	verbs := []string{"get", "list", "watch", "create", "delete", "deletecollection"}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-fanout"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{examplev1.SchemeGroupVersion.Group, crdGroupVersion.Group}, Resources: []string{"databases"}, Verbs: verbs},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: verbs},
		},
	}
	if _, err := b.kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-fanout"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: fanoutGroup}},
	}
	if _, err := b.kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
