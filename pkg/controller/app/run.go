package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/authnready"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/engine"
	// The controller runs every engine of the repository and reaches their servers.
	_ "example.com/database-apiserver/pkg/engine/engines/servers"

	// client-go's REST client, workqueue and leader election metrics in legacyregistry.
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
)

// leaderHealthzTimeout is how long past the lease's expiry a leader that failed to renew
// still reports healthy (kube-controller-manager's value).
const leaderHealthzTimeout = 20 * time.Second

// Run starts the informers and the health server at once, so a standby replica has warm
// caches and reports ready, then reconciles with the configured workers while it holds the
// Lease (or right away without leader election). It returns nil when ctx ends, after the
// workers have finished and the Lease is released; an error when the health server cannot
// start or the controller cannot be built.
//
// Losing the Lease (kube-apiserver unreachable past the renew deadline, or another replica
// took it) does not end Run: the workers stop, and a new term starts with new informers (a
// fresh list of every object, so whatever changed meanwhile is reconciled) and campaigns for
// the Lease again until it leads or ctx ends.
func (c *Config) Run(ctx context.Context) error {
	o := c.Options
	log := klog.FromContext(ctx).WithName(database.ControllerName)
	ctx = klog.NewContext(ctx, log)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var current atomic.Pointer[controllerTerm]
	// The per-Database metrics report the current term's cache: every replica reports them,
	// the leader's and the others' alike (their informers run while they campaign).
	database.RegisterMetrics(func() []*examplev1.Database {
		if t := current.Load(); t != nil {
			return t.controller.Databases()
		}
		return nil
	})
	var leaderHealth *leaderelection.HealthzAdaptor
	if o.LeaderElection.LeaderElect {
		leaderHealth = leaderelection.NewLeaderHealthzAdaptor(leaderHealthzTimeout)
	}
	synced := func() bool {
		t := current.Load()
		return t != nil && t.controller.HasSynced()
	}
	serverDone, err := c.serveHealth(ctx, synced, leaderHealth)
	if err != nil {
		return err
	}
	defer func() {
		cancel()
		<-serverDone
	}()

	log.Info("Starting", "namespace", o.Namespace, "workers", o.Workers, "leaderElection", o.LeaderElection.LeaderElect, "identity", c.Identity)
	for {
		t, err := c.newTerm(ctx)
		if err != nil {
			return err
		}
		current.Store(t)
		if !o.LeaderElection.LeaderElect {
			err = t.controller.Run(ctx, o.Workers)
			t.stop()
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		err = c.lead(ctx, t, leaderHealth)
		t.stop()
		if err != nil || ctx.Err() != nil {
			return err
		}
		log.Info("Lost the lease; the workers stopped, campaigning again with new informers",
			"lease", o.LeaderElection.ResourceNamespace+"/"+o.LeaderElection.ResourceName)
	}
}

// controllerTerm is one leadership term's controller: its informers (started by newTerm) and the
// Database controller on them. A controller's queue shuts down when its workers stop, so each
// term has its own.
type controllerTerm struct {
	controller *database.Controller
	// stop ends the informers and, after them, the Event recorder.
	stop func()
}

// newTerm builds the informers and the controller and starts the informers. Events are
// recorded until stop, so the Lease's "stopped leading" Event, which comes after ctx ends,
// is still written.
func (c *Config) newTerm(ctx context.Context) (*controllerTerm, error) {
	o := c.Options
	eventsCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	// With --namespace every informer is scoped to it; unset, Namespace is metav1.NamespaceAll.
	kubeInformers := database.NewKubeInformerFactory(c.Kube, o.ResyncPeriod, o.Namespace)
	databaseInformers := database.NewDatabaseInformerFactory(c.Databases, o.ResyncPeriod, o.Namespace)
	// Validate refused what SuperuserPrefixes fails on.
	sources, _ := o.SuperuserPrefixes()
	controller, err := database.NewController(eventsCtx, c.Kube, c.Databases, kubeInformers, databaseInformers,
		// The release records live in the controller's own namespace, the Lease's.
		database.Options{Observers: engine.Observers(), ImageRegistry: o.ImageRegistry,
			ClusterDomain: o.ClusterDomain, SuperuserSources: sources, ControllerNamespace: o.LeaderElection.ResourceNamespace})
	if err != nil {
		stopEvents()
		return nil, err
	}
	informersCtx, stopInformers := context.WithCancel(ctx)
	kubeInformers.Start(informersCtx.Done())
	databaseInformers.Start(informersCtx.Done())
	return &controllerTerm{controller: controller, stop: func() {
		stopInformers()
		kubeInformers.Shutdown()
		databaseInformers.Shutdown()
		stopEvents()
	}}, nil
}

// lead campaigns for the Lease and runs t's workers while this process holds it. It returns
// nil once the workers have stopped, because ctx ended (the Lease is then released after them,
// so the next leader never overlaps a worker of this one) or because the Lease was lost; an
// error only when the election cannot be set up.
func (c *Config) lead(ctx context.Context, t *controllerTerm, health *leaderelection.HealthzAdaptor) error {
	o := c.Options
	log := klog.FromContext(ctx)
	lock, err := resourcelock.New(o.LeaderElection.ResourceLock,
		o.LeaderElection.ResourceNamespace, o.LeaderElection.ResourceName,
		c.LeaderElection.CoreV1(), c.LeaderElection.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: c.Identity, EventRecorder: t.controller.EventRecorder()})
	if err != nil {
		return err
	}

	// The election outlives ctx while the workers run, then releases the Lease.
	electionCtx, endElection := context.WithCancel(context.WithoutCancel(ctx))
	defer endElection()
	// workers counts the running OnStartedLeading; once over is set, none starts: the elector
	// calls OnStartedLeading in a goroutine that may run after its Run returned.
	var (
		mu      sync.Mutex
		over    bool
		leading bool
		workers sync.WaitGroup
	)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.LeaderElection.LeaseDuration.Duration,
		RenewDeadline:   o.LeaderElection.RenewDeadline.Duration,
		RetryPeriod:     o.LeaderElection.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Name:            o.LeaderElection.ResourceName,
		WatchDog:        health,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadingCtx context.Context) {
				mu.Lock()
				if over {
					mu.Unlock()
					return
				}
				leading = true
				workers.Add(1)
				mu.Unlock()
				defer workers.Done()
				runCtx, stop := context.WithCancel(leadingCtx)
				defer stop()
				defer context.AfterFunc(ctx, stop)()
				// Run returns once runCtx ends; its only error is caches that never synced
				// before that, which the next term lists again.
				if err := t.controller.Run(runCtx, o.Workers); err != nil && ctx.Err() == nil {
					log.Info("Workers stopped before the caches synced", "err", err)
				}
				endElection() // release the Lease now that no worker runs
			},
			OnStoppedLeading: func() { log.Info("Stopped leading", "lease", lock.Describe()) },
			OnNewLeader: func(identity string) {
				if identity != c.Identity {
					log.Info("Another replica leads", "leader", identity, "lease", lock.Describe())
				}
			},
		},
	})
	if err != nil {
		return err
	}
	health.SetLeaderElection(elector)

	// Until this process leads, the campaign ends with ctx.
	stopCampaign := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !leading {
			endElection()
		}
	})
	defer stopCampaign()
	elector.Run(electionCtx)

	mu.Lock()
	over = true
	mu.Unlock()
	workers.Wait()
	return nil
}

// ClientCACheckName is the /readyz check (/readyz/client-ca) that fails until the client CA
// the secure port verifies client certificates with is loaded and its TLS handshake asks
// for it.
const ClientCACheckName = "client-ca"

// serveHealth serves, on the secure port (unless --secure-port is 0), /healthz (the process,
// and the lease renewal while leading), /readyz (synced: every informer cache of the current
// term synced), /metrics (legacyregistry) and, with --profiling, /debug/pprof, behind the
// filters kube-controller-manager puts in front of its own: authentication, then
// authorization (a 401 for bad credentials, a 403 for a user not allowed the path), request
// info, no caching, panic recovery. The returned channel closes once the server has shut
// down after ctx ends.
func (c *Config) serveHealth(ctx context.Context, synced func() bool,
	leaderHealth *leaderelection.HealthzAdaptor) (<-chan struct{}, error) {
	if c.SecureServing == nil {
		done := make(chan struct{})
		close(done)
		return done, nil
	}
	mux := http.NewServeMux()
	checks := []healthz.HealthChecker{healthz.PingHealthz}
	if leaderHealth != nil {
		checks = append(checks, leaderHealth)
	}
	healthz.InstallHandler(mux, checks...)
	// A client certificate is verified with the client CA, which the delegated authentication
	// reads from kube-system/extension-apiserver-authentication once serving (unless
	// --client-ca-file is given): until it is loaded, /readyz fails and requests are held
	// back with a 503, not refused as system:anonymous. The front-proxy CA, read from the
	// same ConfigMap by another informer, may load first: it is not waited for, as no proxy
	// sends requests here. Nor is a client CA kube-apiserver does not publish.
	clientCA := authnready.ClientCA(ClientCACheckName, c.SecureServing, &c.Authentication, c.Kube)
	healthz.InstallReadyzHandler(mux, healthz.NamedCheck("informer-sync", func(*http.Request) error {
		if !synced() {
			return errors.New("informer caches not synced")
		}
		return nil
	}), clientCA.HealthCheck())
	mux.Handle("/metrics", legacyregistry.Handler())
	if c.Options.EnableProfiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}

	requestInfo := &apirequest.RequestInfoFactory{}
	handler := genericapifilters.WithAuthorization(mux, c.Authorization.Authorizer, scheme.Codecs)
	handler = genericapifilters.WithAuthentication(handler, c.Authentication.Authenticator,
		genericapifilters.Unauthorized(scheme.Codecs), nil, c.Authentication.RequestHeaderConfig)
	handler = genericapifilters.WithRequestInfo(handler, requestInfo)
	handler = genericapifilters.WithCacheControl(handler)
	handler = genericfilters.WithPanicRecovery(handler, requestInfo)
	handler = clientCA.Gate(handler, scheme.Codecs)

	log := klog.FromContext(ctx)
	log.Info("Serving health probes and metrics over HTTPS", "address", c.SecureServing.Listener.Addr().String())
	serving := *c.SecureServing
	serving.Listener = clientCA.Listen(serving.Listener)
	stopped, _, err := serving.Serve(handler, 5*time.Second, ctx.Done())
	if err != nil {
		return nil, fmt.Errorf("serving health probes and metrics: %w", err)
	}
	return stopped, nil
}
