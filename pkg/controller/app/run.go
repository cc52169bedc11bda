package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"example.com/database-apiserver/pkg/controller/database"

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
// listen, the caches never sync, or the Lease is lost (the process must exit: another
// replica leads now).
func (c *Config) Run(ctx context.Context) error {
	o := c.Options
	log := klog.FromContext(ctx).WithName(database.ControllerName)
	ctx = klog.NewContext(ctx, log)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Events are recorded until Run returns: the Lease's "stopped leading" comes after ctx ends.
	eventsCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEvents()

	database.RegisterMetrics()
	kubeInformers := database.NewKubeInformerFactory(c.Kube, o.ResyncPeriod)
	databaseInformers := database.NewDatabaseInformerFactory(c.Databases, o.ResyncPeriod)
	controller, err := database.NewController(eventsCtx, c.Kube, c.Databases, kubeInformers, databaseInformers)
	if err != nil {
		return err
	}

	var leaderHealth *leaderelection.HealthzAdaptor
	if o.LeaderElection.LeaderElect {
		leaderHealth = leaderelection.NewLeaderHealthzAdaptor(leaderHealthzTimeout)
	}
	serverDone, err := c.serveHealth(ctx, controller, leaderHealth)
	if err != nil {
		return err
	}
	defer func() {
		cancel()
		<-serverDone
	}()

	kubeInformers.Start(ctx.Done())
	databaseInformers.Start(ctx.Done())
	defer func() {
		cancel()
		kubeInformers.Shutdown()
		databaseInformers.Shutdown()
	}()

	log.Info("Starting", "workers", o.Workers, "leaderElection", o.LeaderElection.LeaderElect, "identity", c.Identity)
	if !o.LeaderElection.LeaderElect {
		if err := controller.Run(ctx, o.Workers); err != nil && ctx.Err() == nil {
			return err
		}
		return nil
	}
	return c.runLeading(ctx, controller, leaderHealth)
}

// runLeading runs the controller while this process holds the Lease. On shutdown the workers
// stop first and the Lease is released after them, so the next leader never overlaps a
// worker of this one.
func (c *Config) runLeading(ctx context.Context, controller *database.Controller, health *leaderelection.HealthzAdaptor) error {
	o := c.Options
	log := klog.FromContext(ctx)
	lock, err := resourcelock.New(o.LeaderElection.ResourceLock,
		o.LeaderElection.ResourceNamespace, o.LeaderElection.ResourceName,
		c.LeaderElection.CoreV1(), c.LeaderElection.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: c.Identity, EventRecorder: controller.EventRecorder()})
	if err != nil {
		return err
	}

	// The election outlives ctx until the workers are done, then releases the Lease.
	electionCtx, endElection := context.WithCancel(context.WithoutCancel(ctx))
	defer endElection()
	started := make(chan struct{})
	finished := make(chan error, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.LeaderElection.LeaseDuration.Duration,
		RenewDeadline:   o.LeaderElection.RenewDeadline.Duration,
		RetryPeriod:     o.LeaderElection.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Name:            o.LeaderElection.ResourceName,
		WatchDog:        health,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				close(started)
				runCtx, stop := context.WithCancel(leading)
				defer stop()
				defer context.AfterFunc(ctx, stop)()
				err := controller.Run(runCtx, o.Workers)
				finished <- err
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

	go func() {
		<-ctx.Done()
		select {
		case <-started:
		default:
			endElection() // not leading: stop trying to acquire
		}
	}()
	elector.Run(electionCtx)

	select {
	case <-started:
		err := <-finished
		if ctx.Err() != nil {
			return nil // shut down as asked
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("lost the lease %s", lock.Describe())
	default:
		return nil
	}
}

// serveHealth listens on --health-probe-bind-address (unless "0") and serves /healthz (the
// process, and the lease renewal while leading), /readyz (every informer cache synced),
// /metrics (legacyregistry) and, with --profiling, /debug/pprof. The returned channel closes
// once the server has shut down after ctx ends.
func (c *Config) serveHealth(ctx context.Context, controller *database.Controller,
	leaderHealth *leaderelection.HealthzAdaptor) (<-chan struct{}, error) {
	done := make(chan struct{})
	addr := c.Options.HealthProbeBindAddress
	if addr == "0" {
		close(done)
		return done, nil
	}
	mux := http.NewServeMux()
	checks := []healthz.HealthChecker{healthz.PingHealthz}
	if leaderHealth != nil {
		checks = append(checks, leaderHealth)
	}
	healthz.InstallHandler(mux, checks...)
	healthz.InstallReadyzHandler(mux, healthz.NamedCheck("informer-sync", func(*http.Request) error {
		if !controller.HasSynced() {
			return errors.New("informer caches not synced")
		}
		return nil
	}))
	mux.Handle("/metrics", legacyregistry.Handler())
	if c.Options.EnableProfiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}

	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--health-probe-bind-address: %w", err)
	}
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log := klog.FromContext(ctx)
	log.Info("Serving health probes and metrics", "address", listener.Addr().String())
	go func() {
		if err := server.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "Health probe server failed")
		}
	}()
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(shutdownCtx)
	}()
	return done, nil
}
