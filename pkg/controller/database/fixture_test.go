package database_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/engine"
	_ "example.com/database-apiserver/pkg/engine/engines"
	"example.com/database-apiserver/pkg/engine/postgresql/pgclient"
	dbfake "example.com/database-apiserver/pkg/generated/clientset/versioned/fake"
	examplelisters "example.com/database-apiserver/pkg/generated/listers/example/v1"
)

const (
	namespace = "production"
	name      = "my-database"
	dbUID     = types.UID("db-uid")
)

var (
	start = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	key   = cache.ObjectName{Namespace: namespace, Name: name}

	statefulSets    = appsv1.SchemeGroupVersion.WithResource("statefulsets")
	services        = corev1.SchemeGroupVersion.WithResource("services")
	secrets         = corev1.SchemeGroupVersion.WithResource("secrets")
	claims          = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	networkPolicies = networkingv1.SchemeGroupVersion.WithResource("networkpolicies")
	pdbs            = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")
	configMaps      = corev1.SchemeGroupVersion.WithResource("configmaps")
	pods            = corev1.SchemeGroupVersion.WithResource("pods")
	jobs            = batchv1.SchemeGroupVersion.WithResource("jobs")
	events          = corev1.SchemeGroupVersion.WithResource("events")
	databases       = examplev1.SchemeGroupVersion.WithResource("databases")
)

// exampleDatabase is the example Database (artifacts/examples/database.yaml) as the API
// server stores it: defaulted, with a UID and generation 1.
func exampleDatabase() *examplev1.Database {
	return &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: dbUID, Generation: 1, ResourceVersion: "1"},
		Spec: examplev1.DatabaseSpec{
			Engine:         examplev1.EnginePostgreSQL,
			Version:        "14.5",
			Replicas:       ptr.To[int32](3),
			Storage:        "100Gi",
			DeletionPolicy: examplev1.DeletionPolicyDelete,
		},
	}
}

// fixture is a Reconciler on fake clientsets, with listers fed from the fakes' contents
// (sync) as the controller's informers would be (scoped by ManagedBySelector, except claims),
// and every API call recorded in order across both clientsets.
type fixture struct {
	t        *testing.T
	kube     *kubefake.Clientset
	dbs      *dbfake.Clientset
	recorder *record.FakeRecorder
	clock    *clocktesting.FakePassiveClock
	r        *database.Reconciler
	// options are the Reconciler's Options, for a Reconciler that replaces it
	// (restartController).
	options  database.Options
	indexers map[schema.GroupVersionResource]cache.Indexer
	// pinned overrides what sync puts in the listers for these objects (by resource and
	// name): a stale copy, or nil for an object the informer has not delivered yet.
	pinned    map[schema.GroupVersionResource]map[string]runtime.Object
	recording bool
	actions   []string
	// raw are the actions of the last reconcile, for their options.
	raw []k8stesting.Action
}

func newFixture(t *testing.T, db *examplev1.Database, kubeObjects ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWith(t, nil, db, kubeObjects...)
}

// newFixtureWith is newFixture with a Reconciler that asks the servers through instances.
func newFixtureWith(t *testing.T, instances pgclient.Instances, db *examplev1.Database, kubeObjects ...runtime.Object) *fixture {
	t.Helper()
	var options database.Options
	if instances != nil {
		options.Observers = map[examplev1.Engine]engine.Observer{examplev1.EnginePostgreSQL: pgclient.NewReplicator(instances)}
	}
	return newFixtureWithOptions(t, options, db, kubeObjects...)
}

// newFixtureWithOptions is newFixture with the Reconciler's options.
func newFixtureWithOptions(t *testing.T, options database.Options, db *examplev1.Database, kubeObjects ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{
		t:         t,
		options:   options,
		kube:      kubefake.NewClientset(kubeObjects...),
		recorder:  record.NewFakeRecorder(100),
		clock:     clocktesting.NewFakePassiveClock(start),
		indexers:  map[schema.GroupVersionResource]cache.Indexer{},
		pinned:    map[schema.GroupVersionResource]map[string]runtime.Object{},
		recording: true,
	}
	if db != nil {
		f.dbs = dbfake.NewClientset(db)
	} else {
		f.dbs = dbfake.NewClientset()
	}
	for _, c := range []*k8stesting.Fake{&f.kube.Fake, &f.dbs.Fake} {
		c.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			f.record(a)
			return false, nil, nil
		})
	}
	// Play the API server's metadata.resourceVersion for Databases, which the Reconciler
	// compares with what it last wrote: each write a greater one.
	f.dbs.PrependReactor("update", "databases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		db := a.(k8stesting.UpdateAction).GetObject().(*examplev1.Database)
		if stored, err := f.dbs.Tracker().Get(databases, db.Namespace, db.Name); err == nil {
			rv, _ := strconv.Atoi(stored.(*examplev1.Database).ResourceVersion)
			db.ResourceVersion = strconv.Itoa(rv + 1)
		}
		return false, nil, nil
	})
	// Play the API server's metadata.generation for StatefulSets, which the status reads.
	f.kube.PrependReactor("create", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateAction).GetObject().(*appsv1.StatefulSet).Generation = 1
		return false, nil, nil
	})
	// Play the API server's metadata.uid for claims, which the release and unprotect patches
	// carry (the fake clientset sets none): the form createClaims gives its claims.
	f.kube.PrependReactor("create", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if claim := a.(k8stesting.CreateAction).GetObject().(*corev1.PersistentVolumeClaim); claim.UID == "" {
			claim.UID = types.UID(claim.Name + "-uid")
		}
		return false, nil, nil
	})
	// And for Secrets, which the release record holds by uid.
	f.kube.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if secret := a.(k8stesting.CreateAction).GetObject().(*corev1.Secret); secret.UID == "" {
			secret.UID = types.UID(secret.Name + "-uid")
		}
		return false, nil, nil
	})
	// And for Jobs, whose metadata.creationTimestamp tells a backup Job's start.
	f.kube.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if job := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job); job.CreationTimestamp.IsZero() {
			job.CreationTimestamp = metav1.NewTime(f.clock.Now().Truncate(time.Second))
		}
		return false, nil, nil
	})
	f.kube.PrependReactor("update", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sts := a.(k8stesting.UpdateAction).GetObject().(*appsv1.StatefulSet)
		if stored, err := f.kube.Tracker().Get(statefulSets, sts.Namespace, sts.Name); err == nil {
			old := stored.(*appsv1.StatefulSet)
			sts.Generation = old.Generation
			if !equality.Semantic.DeepEqual(old.Spec, sts.Spec) {
				sts.Generation++
			}
		}
		return false, nil, nil
	})
	for _, gvr := range []schema.GroupVersionResource{statefulSets, services, secrets, pdbs, networkPolicies, configMaps, pods, jobs, databases} {
		f.indexers[gvr] = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	f.indexers[claims] = database.NewClaimInformer(f.kube, 0).GetIndexer()
	f.indexers[events] = database.NewEventInformer(f.kube, 0).GetIndexer()
	f.newReconciler()
	f.sync()
	return f
}

func (f *fixture) record(a k8stesting.Action) {
	if f.recording {
		f.actions = append(f.actions, describe(a))
		f.raw = append(f.raw, a)
	}
}

// inject makes the first n calls of verb on resource ("databases/status" names a
// subresource) fail with err; they are recorded like any other.
func (f *fixture) inject(verb, resource string, n int, err error) {
	resource, sub, _ := strings.Cut(resource, "/")
	for _, c := range []*k8stesting.Fake{&f.kube.Fake, &f.dbs.Fake} {
		c.PrependReactor(verb, resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != sub || n == 0 {
				return false, nil, nil
			}
			n--
			f.record(a)
			return true, nil, err
		})
	}
}

// describe renders an action as "verb resource[/subresource] name".
func describe(a k8stesting.Action) string {
	resource := a.GetResource().Resource
	if sub := a.GetSubresource(); sub != "" {
		resource += "/" + sub
	}
	var objName string
	switch a := a.(type) {
	case k8stesting.CreateAction:
		objName = a.GetObject().(metav1.Object).GetName()
	case k8stesting.UpdateAction:
		objName = a.GetObject().(metav1.Object).GetName()
	case k8stesting.DeleteAction:
		objName = a.GetName()
	case k8stesting.PatchAction:
		objName = a.GetName()
	case k8stesting.GetAction:
		objName = a.GetName()
	}
	return strings.TrimSpace(fmt.Sprintf("%s %s %s", a.GetVerb(), resource, objName))
}

// sync fills the listers with the fakes' objects: all Databases, claims and Events (the tests
// create only the StatefulSet controller's, which NewEventInformer's field selector keeps),
// and the other owned kinds' objects labelled ManagedBySelector, as the controller's
// informers see them.
func (f *fixture) sync() {
	f.t.Helper()
	f.recording = false
	defer func() { f.recording = true }()
	selector := database.ManagedBySelector()
	lists := map[schema.GroupVersionResource]func() (runtime.Object, error){
		databases: func() (runtime.Object, error) {
			return f.dbs.ExampleV1().Databases("").List(f.t.Context(), metav1.ListOptions{})
		},
		statefulSets: func() (runtime.Object, error) {
			return f.kube.AppsV1().StatefulSets("").List(f.t.Context(), metav1.ListOptions{})
		},
		services: func() (runtime.Object, error) {
			return f.kube.CoreV1().Services("").List(f.t.Context(), metav1.ListOptions{})
		},
		secrets: func() (runtime.Object, error) {
			return f.kube.CoreV1().Secrets("").List(f.t.Context(), metav1.ListOptions{})
		},
		claims: func() (runtime.Object, error) {
			return f.kube.CoreV1().PersistentVolumeClaims("").List(f.t.Context(), metav1.ListOptions{})
		},
		pdbs: func() (runtime.Object, error) {
			return f.kube.PolicyV1().PodDisruptionBudgets("").List(f.t.Context(), metav1.ListOptions{})
		},
		networkPolicies: func() (runtime.Object, error) {
			return f.kube.NetworkingV1().NetworkPolicies("").List(f.t.Context(), metav1.ListOptions{})
		},
		configMaps: func() (runtime.Object, error) {
			return f.kube.CoreV1().ConfigMaps("").List(f.t.Context(), metav1.ListOptions{})
		},
		pods: func() (runtime.Object, error) {
			return f.kube.CoreV1().Pods("").List(f.t.Context(), metav1.ListOptions{})
		},
		jobs: func() (runtime.Object, error) {
			return f.kube.BatchV1().Jobs("").List(f.t.Context(), metav1.ListOptions{})
		},
		events: func() (runtime.Object, error) {
			return f.kube.CoreV1().Events("").List(f.t.Context(), metav1.ListOptions{})
		},
	}
	for gvr, list := range lists {
		l, err := list()
		require.NoError(f.t, err)
		items, err := meta.ExtractList(l)
		require.NoError(f.t, err)
		var keep []any
		for _, item := range items {
			if _, pinned := f.pinned[gvr][item.(metav1.Object).GetName()]; pinned {
				continue
			}
			if gvr == databases || gvr == claims || gvr == events || selector.Matches(labels.Set(item.(metav1.Object).GetLabels())) {
				keep = append(keep, item)
			}
		}
		for _, obj := range f.pinned[gvr] {
			if obj != nil {
				keep = append(keep, obj)
			}
		}
		require.NoError(f.t, f.indexers[gvr].Replace(keep, ""))
	}
}

// pin makes the listers hold obj for the object named n of gvr, whatever the API server has,
// until unpin: a stale copy, or with obj nil nothing, as an informer that lags behind.
func (f *fixture) pin(gvr schema.GroupVersionResource, n string, obj runtime.Object) {
	if f.pinned[gvr] == nil {
		f.pinned[gvr] = map[string]runtime.Object{}
	}
	f.pinned[gvr][n] = obj
}

// unpin lets the listers follow the API server again for the object named n of gvr: the
// informer caught up.
func (f *fixture) unpin(gvr schema.GroupVersionResource, n string) { delete(f.pinned[gvr], n) }

// reconcile syncs the listers, forgets earlier actions and events, and reconciles the example
// key once.
func (f *fixture) reconcile() (database.Result, error) {
	f.t.Helper()
	f.sync()
	f.actions, f.raw = nil, nil
	f.events()
	return f.r.Reconcile(f.t.Context(), key)
}

// events drains the recorded Events.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *fixture) database() *examplev1.Database {
	f.t.Helper()
	db, err := f.dbs.Tracker().Get(databases, namespace, name)
	require.NoError(f.t, err)
	return db.(*examplev1.Database)
}

// updateDatabase changes the stored Database as a user would (no recorded action), bumping
// its generation when the spec changes.
func (f *fixture) updateDatabase(change func(*examplev1.Database)) {
	f.t.Helper()
	db := f.database().DeepCopy()
	before := db.Spec
	change(db)
	if before != db.Spec {
		db.Generation++
	}
	require.NoError(f.t, f.dbs.Tracker().Update(databases, db, namespace))
}

func (f *fixture) statefulSet() *appsv1.StatefulSet {
	f.t.Helper()
	obj, err := f.kube.Tracker().Get(statefulSets, namespace, name)
	require.NoError(f.t, err)
	return obj.(*appsv1.StatefulSet)
}

func (f *fixture) secret() *corev1.Secret {
	f.t.Helper()
	obj, err := f.kube.Tracker().Get(secrets, namespace, name+"-credentials")
	require.NoError(f.t, err)
	return obj.(*corev1.Secret)
}

func (f *fixture) service(n string) *corev1.Service {
	f.t.Helper()
	obj, err := f.kube.Tracker().Get(services, namespace, n)
	require.NoError(f.t, err)
	return obj.(*corev1.Service)
}

func (f *fixture) claim(n string) *corev1.PersistentVolumeClaim {
	f.t.Helper()
	obj, err := f.kube.Tracker().Get(claims, namespace, n)
	require.NoError(f.t, err)
	return obj.(*corev1.PersistentVolumeClaim)
}

func (f *fixture) exists(gvr schema.GroupVersionResource, n string) bool {
	_, err := f.kube.Tracker().Get(gvr, namespace, n)
	return err == nil
}

// setStatefulSetStatus plays the StatefulSet controller: generation observed, ready and
// updated replicas, and revisions (rolled out when update equals current).
func (f *fixture) setStatefulSetStatus(ready int32, currentRevision, updateRevision string) {
	f.t.Helper()
	sts := f.statefulSet().DeepCopy()
	replicas := ptr.Deref(sts.Spec.Replicas, 1)
	sts.Status = appsv1.StatefulSetStatus{
		ObservedGeneration: sts.Generation,
		Replicas:           replicas,
		ReadyReplicas:      ready,
		AvailableReplicas:  ready,
		CurrentReplicas:    replicas,
		UpdatedReplicas:    replicas,
		CurrentRevision:    currentRevision,
		UpdateRevision:     updateRevision,
	}
	require.NoError(f.t, f.kube.Tracker().Update(statefulSets, sts, namespace))
}

// createClaims plays the StatefulSet controller and the volume binder: claims
// data-<name>-<i> from the volumeClaimTemplate where there is none (the Reconciler creates
// those about to be mounted itself), every one bound, its capacity the size it requests.
func (f *fixture) createClaims(n int) {
	f.t.Helper()
	tmpl := f.statefulSet().Spec.VolumeClaimTemplates[0]
	for i := range n {
		if existing, err := f.kube.Tracker().Get(claims, namespace, fmt.Sprintf("data-%s-%d", name, i)); err == nil {
			bound := existing.(*corev1.PersistentVolumeClaim).DeepCopy()
			bound.Status.Phase = corev1.ClaimBound
			bound.Status.Capacity = bound.Spec.Resources.Requests.DeepCopy()
			require.NoError(f.t, f.kube.Tracker().Update(claims, bound, namespace))
			continue
		}
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: *tmpl.ObjectMeta.DeepCopy(),
			Spec:       *tmpl.Spec.DeepCopy(),
			Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: tmpl.Spec.Resources.Requests.DeepCopy()},
		}
		claim.Name = fmt.Sprintf("data-%s-%d", name, i)
		claim.Namespace = namespace
		claim.UID = types.UID(claim.Name + "-uid")
		require.NoError(f.t, f.kube.Tracker().Add(claim))
	}
}

// ready brings the example Database to phase Ready through the Reconciler: first Reconcile,
// then the StatefulSet controller's work (claims, every replica ready), then a second
// Reconcile that writes the Ready status.
func (f *fixture) ready() {
	f.t.Helper()
	_, err := f.reconcile()
	require.NoError(f.t, err)
	f.createClaims(int(ptr.Deref(f.database().Spec.Replicas, 1)))
	f.setStatefulSetStatus(ptr.Deref(f.statefulSet().Spec.Replicas, 1), "rev-1", "rev-1")
	result, err := f.reconcile()
	require.NoError(f.t, err)
	require.Equal(f.t, database.Result{}, result)
	require.Equal(f.t, examplev1.DatabasePhaseReady, f.database().Status.Phase)
}

// growClaims plays the resizer and the kubelet: the capacity of each claim reaches its
// request.
func (f *fixture) growClaims() {
	f.t.Helper()
	for i := range int(ptr.Deref(f.database().Spec.Replicas, 1)) {
		claim := f.claim(fmt.Sprintf("data-%s-%d", name, i)).DeepCopy()
		claim.Status.Capacity = claim.Spec.Resources.Requests.DeepCopy()
		require.NoError(f.t, f.kube.Tracker().Update(claims, claim, namespace))
	}
}

func condition(db *examplev1.Database, typ string) metav1.Condition {
	c := meta.FindStatusCondition(db.Status.Conditions, typ)
	if c == nil {
		return metav1.Condition{}
	}
	return *c
}

// newReconciler makes f.r, a Reconciler over f's clientsets, listers, recorder, clock and
// fake servers.
func (f *fixture) newReconciler() {
	f.r = database.NewReconciler(f.kube, f.dbs, database.Listers{
		Databases:              examplelisters.NewDatabaseLister(f.indexers[databases]),
		StatefulSets:           appslisters.NewStatefulSetLister(f.indexers[statefulSets]),
		Services:               corelisters.NewServiceLister(f.indexers[services]),
		Secrets:                corelisters.NewSecretLister(f.indexers[secrets]),
		PodDisruptionBudgets:   policylisters.NewPodDisruptionBudgetLister(f.indexers[pdbs]),
		NetworkPolicies:        networkinglisters.NewNetworkPolicyLister(f.indexers[networkPolicies]),
		ConfigMaps:             corelisters.NewConfigMapLister(f.indexers[configMaps]),
		Pods:                   corelisters.NewPodLister(f.indexers[pods]),
		Jobs:                   batchlisters.NewJobLister(f.indexers[jobs]),
		PersistentVolumeClaims: f.indexers[claims],
		Events:                 f.indexers[events],
	}, f.recorder, f.clock, f.options)
}
