package database

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/generated/clientset/versioned"
	"example.com/database-apiserver/pkg/generated/informers/externalversions"
	examplelisters "example.com/database-apiserver/pkg/generated/listers/example/v1"
	"example.com/database-apiserver/pkg/names"
)

// ControllerName names the controller: the workqueue (its metrics' name label), the Events'
// source component and the logger.
const ControllerName = "database-controller"

// Scheme knows client-go's built-in types and example.com/v1, so the event recorder can
// build an ObjectReference (kind Database, apiVersion example.com/v1) for a Database read
// from an informer, whose TypeMeta is empty.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(examplev1.AddToScheme(Scheme))
}

// Reconcile metrics, registered in legacyregistry (served on /metrics) by RegisterMetrics.
var (
	reconcileTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "database_controller",
		Name:           "reconcile_total",
		Help:           "Number of Database reconciles by result: success, requeue (success with RequeueAfter) or error.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	reconcileDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      "database_controller",
		Name:           "reconcile_duration_seconds",
		Help:           "How long one Database reconcile takes, in seconds.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15), // 1ms .. ~16s
		StabilityLevel: metrics.ALPHA,
	})
	registerMetrics sync.Once
)

// Result labels of reconcileTotal.
const (
	resultSuccess = "success"
	resultRequeue = "requeue"
	resultError   = "error"
)

// metricsDatabases is the latest non-nil databases given to RegisterMetrics.
var metricsDatabases atomic.Pointer[func() []*examplev1.Database]

// RegisterMetrics registers in legacyregistry the reconcile metrics, the controller's counts
// of failovers and switchovers, and the per-Database gauges (metrics.go) of the Databases
// databases returns at each scrape (nil before the controller's cache is built). It is safe
// to call more than once: the metrics are registered once, and the latest non-nil databases
// serves. Workqueue metrics come from importing
// k8s.io/component-base/metrics/prometheus/workqueue.
func RegisterMetrics(databases func() []*examplev1.Database) {
	if databases != nil {
		metricsDatabases.Store(&databases)
	}
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(reconcileTotal, reconcileDuration, failoversTotal, switchoversTotal)
		legacyregistry.CustomMustRegister(newDatabaseCollector(func() []*examplev1.Database {
			if f := metricsDatabases.Load(); f != nil {
				return (*f)()
			}
			return nil
		}))
	})
}

// reconciler is what the workers call; *Reconciler in production, a fake in tests.
type reconciler interface {
	Reconcile(ctx context.Context, key cache.ObjectName) (Result, error)
}

// Controller feeds the Reconciler from informers: Databases (read through kube-apiserver like
// any client), the kinds it owns, scoped by ManagedBySelector except PersistentVolumeClaims
// (NewClaimInformer), and the StatefulSet controller's Events (NewEventInformer). Every event
// of a Database, of an object a Database controls, or of a Pod creation of its StatefulSet,
// enqueues the Database's namespace/name; N workers reconcile keys from a rate-limited
// workqueue.
type Controller struct {
	reconciler  reconciler
	queue       workqueue.TypedRateLimitingInterface[cache.ObjectName]
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	// synced reports, per informer, that its initial list reached our handlers.
	synced []cache.InformerSynced
	// statefulSets finds the StatefulSet an Event is about (enqueueEvent).
	statefulSets appslisters.StatefulSetLister
	// databases is the Database cache, which the per-Database metrics report.
	databases examplelisters.DatabaseLister
}

// NewKubeInformerFactory returns the shared informer factory for the kinds a Database owns,
// listing and watching only objects labelled ManagedBySelector: the controller never caches a
// cluster's other Secrets or Services. Two informers, registered here, have their own list
// options instead, and are only started and stopped with the factory: the claim informer
// (NewClaimInformer, unfiltered) and the Event informer (NewEventInformer, selected by fields:
// Events have no labels). resync is the informers' resync period (0: none). namespace scopes
// every informer of the factory, those two included, to one namespace; metav1.NamespaceAll
// ("") watches every namespace.
func NewKubeInformerFactory(kube kubernetes.Interface, resync time.Duration, namespace string) informers.SharedInformerFactory {
	selector := ManagedBySelector().String()
	factory := informers.NewSharedInformerFactoryWithOptions(kube, resync, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	factory.InformerFor(&corev1.PersistentVolumeClaim{}, func(kube kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return newClaimInformer(kube, namespace, resync)
	})
	factory.InformerFor(&corev1.Event{}, func(kube kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return newEventInformer(kube, namespace, resync)
	})
	return factory
}

// NewClaimInformer returns an informer of the PersistentVolumeClaims of every namespace, with
// the indexes cache.NamespaceIndex and ClaimsByDatabaseIndex. It is the one kind the
// controller caches unfiltered, not scoped by ManagedBySelector: the StatefulSet controller
// mounts a claim by its name, "data-<database>-<ordinal>", whatever its labels, so a claim of
// ours whose labels were edited by hand, a foreign claim holding such a name (a conflict), and
// one a deletionPolicy Retain released (to adopt) must all be seen. Reading them from the
// cache instead of LISTing a namespace's claims on every reconcile keeps N Databases from
// costing N² claims read. The cost is memory for every claim of the cluster. resync is the
// resync period (0: none); its signature is that of a factory's InformerFor.
func NewClaimInformer(kube kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
	return newClaimInformer(kube, metav1.NamespaceAll, resync)
}

// newClaimInformer is NewClaimInformer's informer in namespace (metav1.NamespaceAll: every
// namespace).
func newClaimInformer(kube kubernetes.Interface, namespace string, resync time.Duration) cache.SharedIndexInformer {
	return coreinformers.NewPersistentVolumeClaimInformer(kube, namespace, resync, cache.Indexers{
		cache.NamespaceIndex:  cache.MetaNamespaceIndexFunc,
		ClaimsByDatabaseIndex: ClaimsByDatabase,
	})
}

// NewDatabaseInformerFactory returns the shared informer factory for Databases in namespace
// (metav1.NamespaceAll: every namespace). resync is the informers' resync period (0: none).
func NewDatabaseInformerFactory(databases versioned.Interface, resync time.Duration, namespace string) externalversions.SharedInformerFactory {
	return externalversions.NewSharedInformerFactoryWithOptions(databases, resync, externalversions.WithNamespace(namespace))
}

// NewController registers event handlers on the informers of kubeInformers (which should come
// from NewKubeInformerFactory) and databaseInformers, and builds the Reconciler with their
// listers and an event recorder that writes core/v1 Events through kube, with the
// Reconciler's options. The caller starts the
// factories (before or after Run); Events are recorded until ctx ends. It fails when
// kubeInformers already holds a PersistentVolumeClaim informer other than NewClaimInformer's
// (one without ClaimsByDatabaseIndex) or an Event informer other than NewEventInformer's (one
// without EventsByObjectUIDIndex).
func NewController(ctx context.Context, kube kubernetes.Interface, databases versioned.Interface,
	kubeInformers informers.SharedInformerFactory, databaseInformers externalversions.SharedInformerFactory, options Options) (*Controller, error) {
	logger := klog.FromContext(ctx)

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(Scheme, corev1.EventSource{Component: ControllerName})

	databaseInformer := databaseInformers.Example().V1().Databases()
	statefulSets := kubeInformers.Apps().V1().StatefulSets()
	services := kubeInformers.Core().V1().Services()
	secrets := kubeInformers.Core().V1().Secrets()
	claims := kubeInformers.InformerFor(&corev1.PersistentVolumeClaim{}, NewClaimInformer)
	if _, ok := claims.GetIndexer().GetIndexers()[ClaimsByDatabaseIndex]; !ok {
		return nil, errors.New("the PersistentVolumeClaim informer has no index " + ClaimsByDatabaseIndex + ": build the factory with NewKubeInformerFactory")
	}
	events := kubeInformers.InformerFor(&corev1.Event{}, NewEventInformer)
	if _, ok := events.GetIndexer().GetIndexers()[EventsByObjectUIDIndex]; !ok {
		return nil, errors.New("the Event informer has no index " + EventsByObjectUIDIndex + ": build the factory with NewKubeInformerFactory")
	}
	pdbs := kubeInformers.Policy().V1().PodDisruptionBudgets()
	networkPolicies := kubeInformers.Networking().V1().NetworkPolicies()
	configMaps := kubeInformers.Core().V1().ConfigMaps()
	pods := kubeInformers.Core().V1().Pods()
	jobs := kubeInformers.Batch().V1().Jobs()

	c := &Controller{
		reconciler: NewReconciler(kube, databases, Listers{
			Databases:              databaseInformer.Lister(),
			StatefulSets:           statefulSets.Lister(),
			Services:               services.Lister(),
			Secrets:                secrets.Lister(),
			PodDisruptionBudgets:   pdbs.Lister(),
			NetworkPolicies:        networkPolicies.Lister(),
			ConfigMaps:             configMaps.Lister(),
			Pods:                   pods.Lister(),
			Jobs:                   jobs.Lister(),
			PersistentVolumeClaims: claims.GetIndexer(),
			Events:                 events.GetIndexer(),
		}, recorder, clock.RealClock{}, options),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: ControllerName},
		),
		broadcaster:  broadcaster,
		recorder:     recorder,
		statefulSets: statefulSets.Lister(),
		databases:    databaseInformer.Lister(),
	}

	reg, err := databaseInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueDatabase,
		UpdateFunc: func(_, obj any) { c.enqueueDatabase(obj) },
		DeleteFunc: c.enqueueDatabase,
	})
	if err != nil {
		return nil, err
	}
	c.synced = append(c.synced, reg.HasSynced)
	// changes calls enqueue on every add, delete and change of an object; a periodic resync
	// of an unchanged object is skipped, the Databases' own resync already reconciles
	// everything.
	changes := func(enqueue func(any)) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc: enqueue,
			UpdateFunc: func(old, obj any) {
				if o, n := old.(metav1.Object), obj.(metav1.Object); o.GetResourceVersion() == n.GetResourceVersion() {
					return
				}
				enqueue(obj)
			},
			DeleteFunc: enqueue,
		}
	}
	for _, h := range []struct {
		informer cache.SharedIndexInformer
		enqueue  func(any)
	}{
		{statefulSets.Informer(), c.enqueueOwner},
		{services.Informer(), c.enqueueOwner},
		{secrets.Informer(), c.enqueueOwner},
		{claims, c.enqueueClaim},
		{pdbs.Informer(), c.enqueueOwner},
		{networkPolicies.Informer(), c.enqueueOwner},
		{configMaps.Informer(), c.enqueueOwner},
		{pods.Informer(), c.enqueuePod},
		{jobs.Informer(), c.enqueueOwner},
		{events, c.enqueueEvent},
	} {
		reg, err := h.informer.AddEventHandler(changes(h.enqueue))
		if err != nil {
			return nil, err
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	logger.V(4).Info("Event handlers registered", "controller", ControllerName)
	return c, nil
}

// EventRecorder is the recorder the Reconciler writes Events with (Source.Component
// ControllerName).
func (c *Controller) EventRecorder() record.EventRecorder { return c.recorder }

// HasSynced reports whether every informer has listed and delivered its initial objects to
// the controller's handlers: the readiness of the process (/readyz).
// Databases returns every Database in the controller's cache, for the per-Database metrics
// (RegisterMetrics).
func (c *Controller) Databases() []*examplev1.Database {
	dbs, _ := c.databases.List(labels.Everything())
	return dbs
}

func (c *Controller) HasSynced() bool {
	for _, synced := range c.synced {
		if !synced() {
			return false
		}
	}
	return true
}

// Run waits for the informers' caches (the factories must be started), then runs workers
// goroutines reconciling Databases until ctx ends. It shuts the queue down, waits for the
// workers to finish the keys in hand, and returns nil; or an error if the caches never sync.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)

	logger.Info("Starting controller", "controller", ControllerName, "workers", workers)
	var wg sync.WaitGroup
	defer func() {
		c.queue.ShutDown()
		wg.Wait()
		logger.Info("Stopped controller", "controller", ControllerName)
	}()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return errors.New("timed out waiting for caches to sync")
	}
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	<-ctx.Done()
	return nil
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

// processNextWorkItem reconciles one key and returns false once the queue shuts down. A
// success forgets the key's failures; a RequeueAfter comes back after that delay; an error
// comes back with the rate limiter's per-key exponential backoff.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)

	logger := klog.LoggerWithValues(klog.FromContext(ctx), "database", key)
	ctx = klog.NewContext(ctx, logger)
	start := time.Now()
	result, err := c.reconciler.Reconcile(ctx, key)
	reconcileDuration.Observe(time.Since(start).Seconds())

	switch {
	case apierrors.IsConflict(err):
		// A write based on a stale cache: routine with informers, so not logged as an error.
		// The informer delivers the newer object soon; the backoff covers the wait.
		reconcileTotal.WithLabelValues(resultError).Inc()
		logger.V(2).Info("Reconcile hit a conflict, requeuing with backoff", "err", err)
		c.queue.AddRateLimited(key)
	case err != nil:
		reconcileTotal.WithLabelValues(resultError).Inc()
		utilruntime.HandleErrorWithContext(ctx, err, "Reconcile failed, requeuing with backoff",
			"database", key, "retries", c.queue.NumRequeues(key))
		c.queue.AddRateLimited(key)
	case result.RequeueAfter > 0:
		reconcileTotal.WithLabelValues(resultRequeue).Inc()
		c.queue.Forget(key)
		c.queue.AddAfter(key, result.RequeueAfter)
		logger.V(4).Info("Reconciled, requeued", "after", result.RequeueAfter)
	default:
		reconcileTotal.WithLabelValues(resultSuccess).Inc()
		c.queue.Forget(key)
		logger.V(4).Info("Reconciled", "duration", time.Since(start))
	}
	return true
}

// enqueueDatabase queues a Database's namespace/name, including for a deletion whose final
// state the informer missed (a tombstone).
func (c *Controller) enqueueDatabase(obj any) {
	name, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(name)
}

// databaseKind is the controller owner reference that makes an object one of a Database's
// children. Only the group and kind are compared, so a future version still maps.
var databaseKind = examplev1.SchemeGroupVersion.WithKind("Database").GroupKind()

// enqueueOwner queues the Database that controls obj (a child, or the tombstone of a deleted
// one), if any. Objects controlled by anything else are ignored.
func (c *Controller) enqueueOwner(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	object, ok := obj.(metav1.Object)
	if !ok {
		utilruntime.HandleError(errors.New("event for an object without metadata"))
		return
	}
	owner := metav1.GetControllerOf(object)
	if owner == nil || owner.Kind != databaseKind.Kind {
		return
	}
	if gv, err := schema.ParseGroupVersion(owner.APIVersion); err != nil || gv.Group != databaseKind.Group {
		return
	}
	c.queue.Add(cache.ObjectName{Namespace: object.GetNamespace(), Name: owner.Name})
}

// enqueuePod enqueues the Database whose Pod obj is (names.DatabaseOfPod): its StatefulSet
// controls the Pod, but a Pod's start, readiness and end move its Database's replication.
func (c *Controller) enqueuePod(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if database, ok := names.DatabaseOfPod(pod); ok {
		c.queue.Add(cache.ObjectName{Namespace: pod.Namespace, Name: database})
	}
}

// enqueueClaim enqueues the controller of a PersistentVolumeClaim, as enqueueOwner does, and
// also the Database its name is a data claim of ("data-<database>-<ordinal>"), whoever
// controls it: a foreign claim in the way of a Database (a ChildConflict) or a retained one
// to adopt is seen as soon as it changes or goes away, not only at the next requeue.
func (c *Controller) enqueueClaim(obj any) {
	c.enqueueOwner(obj)
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	claim, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if database, _, ok := names.ParseDataClaimName(claim.GetName()); ok {
		c.queue.Add(cache.ObjectName{Namespace: claim.GetNamespace(), Name: database})
	}
}

// enqueueEvent enqueues the Database that controls the StatefulSet a FailedCreate or
// SuccessfulCreate Event of the StatefulSet controller is about (the StatefulSet of the
// Event's namespace and involvedObject.name in the cache, with the Event's
// involvedObject.uid): a refused Pod creation, or its end, changes the Database's status.
// Events of other reasons, and of StatefulSets not in the cache, are ignored.
func (c *Controller) enqueueEvent(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	event, ok := obj.(*corev1.Event)
	if !ok || (event.Reason != examplev1.ReasonFailedCreate && event.Reason != eventReasonSuccessfulCreate) {
		return
	}
	sts, err := c.statefulSets.StatefulSets(event.InvolvedObject.Namespace).Get(event.InvolvedObject.Name)
	if err != nil || sts.UID != event.InvolvedObject.UID {
		return
	}
	c.enqueueOwner(sts)
}
