// Package app is the database-controller command: its options (flags grouped as Kubernetes
// components group them), the clients they configure, and Run: informers, the health and
// metrics server, leader election on a Lease, and the Database controller's workers.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseconfig "k8s.io/component-base/config"
	configoptions "k8s.io/component-base/config/options"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"

	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/generated/clientset/versioned"

	// JSON log format (--logging-format=json).
	_ "k8s.io/component-base/logs/json/register"
)

// Defaults of the flags.
const (
	// DefaultLeaseNamespace is where the controller runs in a real install
	// (artifacts/deploy/namespace.yaml); its RBAC grants the Lease there.
	DefaultLeaseNamespace = "database-system"
	// DefaultLeaseName is the Lease the replicas compete for, named in the RBAC's resourceNames.
	DefaultLeaseName = database.ControllerName
	// DefaultHealthProbeBindAddress serves /healthz, /readyz and /metrics.
	DefaultHealthProbeBindAddress = ":8081"
	// DefaultWorkers is how many Databases are reconciled at once.
	DefaultWorkers = 4

	contentTypeJSON     = "application/json"
	contentTypeProtobuf = "application/vnd.kubernetes.protobuf"
)

// registryPattern is what --image-registry takes: a registry host (a DNS name or IPv4
// address, lower case), an optional port, and an optional path of lower-case components, the
// form of an image reference's name before the repository
// (https://github.com/distribution/reference/blob/main/reference.go), without a scheme.
var registryPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*/?$`)

// Options are the command-line options of database-controller.
type Options struct {
	// ClientConnection is the kubeconfig (empty: in-cluster), QPS, burst and the content type
	// for built-in kinds.
	ClientConnection componentbaseconfig.ClientConnectionConfiguration
	// LeaderElection: on by default, on a Lease, as Kubernetes components do it.
	LeaderElection componentbaseconfig.LeaderElectionConfiguration
	// Workers is how many Databases are reconciled concurrently (at least 1).
	Workers int
	// ResyncPeriod is the informers' resync period: every Database is reconciled again this
	// often even without a change (0 turns resyncs off).
	ResyncPeriod time.Duration
	// HealthProbeBindAddress is host:port for /healthz, /readyz and /metrics; "0" turns the
	// server off.
	HealthProbeBindAddress string
	// EnableProfiling serves /debug/pprof on the health probe address.
	EnableProfiling bool
	// ImageRegistry, when set, is the registry (and path) the database images are pulled
	// from instead of the catalog's: "registry.example:5000/mirror" runs
	// "registry.example:5000/mirror/postgres:15" for "postgres:15".
	ImageRegistry string
	// Logs is the logging configuration (format, verbosity, ...).
	Logs *logsapi.LoggingConfiguration
	// FeatureGates holds the logging feature gates (--feature-gates).
	FeatureGates featuregate.MutableVersionedFeatureGate
}

// NewOptions returns the default options: 4 workers, a 10 minute resync, leader election on
// the Lease database-system/database-controller with Kubernetes components' timings, health
// probes on :8081, protobuf at 100 QPS (burst 200) per client, text logs.
//
// The client-side limit is a backstop, not the throttle: the workers bound how many requests
// are in flight, and kube-apiserver's API Priority and Fairness protects it. At 20 QPS
// (burst 30), the former default, the controller spent most of its time waiting for its own
// rate limiter when many Databases arrived at once (hack/bench: 300 new Databases Ready in
// 87 s against 58 s at 200 QPS; docs/benchmarks.md).
func NewOptions() *Options {
	gates := featuregate.NewFeatureGate()
	utilruntime.Must(logsapi.AddFeatureGates(gates))
	return &Options{
		ClientConnection: componentbaseconfig.ClientConnectionConfiguration{
			ContentType: contentTypeProtobuf,
			QPS:         100,
			Burst:       200,
		},
		LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:       true,
			LeaseDuration:     metav1Duration(15 * time.Second),
			RenewDeadline:     metav1Duration(10 * time.Second),
			RetryPeriod:       metav1Duration(2 * time.Second),
			ResourceLock:      resourcelock.LeasesResourceLock,
			ResourceName:      DefaultLeaseName,
			ResourceNamespace: DefaultLeaseNamespace,
		},
		Workers:                DefaultWorkers,
		ResyncPeriod:           10 * time.Minute,
		HealthProbeBindAddress: DefaultHealthProbeBindAddress,
		Logs:                   logsapi.NewLoggingConfiguration(),
		FeatureGates:           gates,
	}
}

// Flags returns the flags of o in named sets, so --help prints them grouped.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets

	fs := fss.FlagSet("controller")
	fs.IntVar(&o.Workers, "workers", o.Workers, "How many Databases are reconciled concurrently.")
	fs.StringVar(&o.ImageRegistry, "image-registry", o.ImageRegistry,
		"Registry and path to pull the database images from instead of the catalog's (e.g. registry.example:5000/mirror: postgres:15 becomes registry.example:5000/mirror/postgres:15), for a mirrored or air-gapped cluster.")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", o.ResyncPeriod,
		"How often every Database is reconciled again without a change (0 turns resyncs off).")

	fs = fss.FlagSet("client connection")
	fs.StringVar(&o.ClientConnection.Kubeconfig, "kubeconfig", o.ClientConnection.Kubeconfig,
		"Path to a kubeconfig. Empty uses the in-cluster configuration of the Pod's ServiceAccount.")
	fs.StringVar(&o.ClientConnection.ContentType, "content-type", o.ClientConnection.ContentType,
		"Content type of requests, for built-in kinds and Databases alike: "+contentTypeProtobuf+" or "+contentTypeJSON+
			". With "+contentTypeProtobuf+", JSON responses are accepted too.")
	fs.Float32Var(&o.ClientConnection.QPS, "kube-api-qps", o.ClientConnection.QPS,
		"Queries per second to kube-apiserver, per client.")
	fs.Int32Var(&o.ClientConnection.Burst, "kube-api-burst", o.ClientConnection.Burst,
		"Burst of queries to kube-apiserver, per client.")

	configoptions.BindLeaderElectionFlags(&o.LeaderElection, fss.FlagSet("leader election"))

	fs = fss.FlagSet("health and debugging")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress,
		"host:port serving /healthz, /readyz (informer caches synced) and /metrics over HTTP; 0 turns it off.")
	fs.BoolVar(&o.EnableProfiling, "profiling", o.EnableProfiling,
		"Serve /debug/pprof on the health probe address.")

	logsapi.AddFlags(o.Logs, fss.FlagSet("logs"))
	o.FeatureGates.AddFlag(fss.FlagSet("logs"))
	return fss
}

// Validate returns every problem with the options at once. The logging options are validated
// when NewCommand applies them, once per process.
func (o *Options) Validate() error {
	var errs []error
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", o.Workers))
	}
	if o.ResyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("--resync-period must not be negative, got %v", o.ResyncPeriod))
	}
	switch o.ClientConnection.ContentType {
	case contentTypeJSON, contentTypeProtobuf:
	default:
		errs = append(errs, fmt.Errorf("--content-type must be %s or %s, got %q",
			contentTypeProtobuf, contentTypeJSON, o.ClientConnection.ContentType))
	}
	if o.ClientConnection.QPS < 0 || o.ClientConnection.Burst < 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must not be negative"))
	}
	if r := o.ImageRegistry; r != "" && !registryPattern.MatchString(r) {
		errs = append(errs, fmt.Errorf("--image-registry must be a registry host, optionally with a port and a path (registry.example:5000/mirror), without a scheme, tag or digest, got %q", r))
	}
	if o.HealthProbeBindAddress != "0" {
		if _, _, err := net.SplitHostPort(o.HealthProbeBindAddress); err != nil {
			errs = append(errs, fmt.Errorf("--health-probe-bind-address: %w", err))
		}
	}
	if le := o.LeaderElection; le.LeaderElect {
		if le.ResourceLock != resourcelock.LeasesResourceLock {
			errs = append(errs, fmt.Errorf("--leader-elect-resource-lock must be %q, got %q",
				resourcelock.LeasesResourceLock, le.ResourceLock))
		}
		for _, msg := range validation.IsDNS1123Subdomain(le.ResourceName) {
			errs = append(errs, fmt.Errorf("--leader-elect-resource-name %q: %s", le.ResourceName, msg))
		}
		for _, msg := range validation.IsDNS1123Label(le.ResourceNamespace) {
			errs = append(errs, fmt.Errorf("--leader-elect-resource-namespace %q: %s", le.ResourceNamespace, msg))
		}
		// The same rules leaderelection.NewLeaderElector enforces, reported with flag names.
		if le.LeaseDuration.Duration <= le.RenewDeadline.Duration {
			errs = append(errs, errors.New("--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"))
		}
		if le.RenewDeadline.Duration <= time.Duration(leaderelection.JitterFactor*float64(le.RetryPeriod.Duration)) {
			errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline must be greater than %v times --leader-elect-retry-period",
				leaderelection.JitterFactor))
		}
		if le.RetryPeriod.Duration <= 0 {
			errs = append(errs, errors.New("--leader-elect-retry-period must be positive"))
		}
	}
	return utilerrors.NewAggregate(errs)
}

// Config is what Run needs, built from Options: the clients and the options themselves.
type Config struct {
	Options *Options
	// Kube talks to kube-apiserver about built-in kinds (in --content-type).
	Kube kubernetes.Interface
	// Databases talks to example.com through kube-apiserver (in --content-type).
	Databases versioned.Interface
	// LeaderElection is a separate client, so a busy controller cannot starve lease renewal.
	LeaderElection kubernetes.Interface
	// Identity is this process's name in the Lease: <hostname>_<uuid>.
	Identity string
}

// Config builds the clients from the kubeconfig (or the in-cluster configuration). It fails
// when the kubeconfig cannot be read.
func (o *Options) Config() (*Config, error) {
	restConfig, err := clientcmd.BuildConfigFromFlags("", o.ClientConnection.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading the client configuration: %w", err)
	}
	restConfig.QPS = o.ClientConnection.QPS
	restConfig.Burst = int(o.ClientConnection.Burst)
	restConfig = rest.AddUserAgent(restConfig, database.ControllerName)

	kubeConfig := rest.CopyConfig(restConfig)
	kubeConfig.ContentType = o.ClientConnection.ContentType
	if kubeConfig.ContentType == contentTypeProtobuf {
		kubeConfig.AcceptContentTypes = contentTypeProtobuf + "," + contentTypeJSON
	}
	kube, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return nil, err
	}
	// database-apiserver serves protobuf too, so Databases follow --content-type.
	databases, err := versioned.NewForConfig(kubeConfig)
	if err != nil {
		return nil, err
	}
	leConfig := rest.CopyConfig(kubeConfig)
	leConfig = rest.AddUserAgent(leConfig, "leader-election")
	// As kube-controller-manager: a renewal request never outlives half the renew deadline.
	leConfig.Timeout = o.LeaderElection.RenewDeadline.Duration / 2
	leClient, err := kubernetes.NewForConfig(leConfig)
	if err != nil {
		return nil, err
	}
	hostname, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	return &Config{
		Options:        o,
		Kube:           kube,
		Databases:      databases,
		LeaderElection: leClient,
		Identity:       hostname + "_" + string(uuid.NewUUID()),
	}, nil
}

// NewCommand returns the database-controller cobra command for o; it runs until ctx is
// cancelled.
func NewCommand(ctx context.Context, o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   database.ControllerName,
		Short: "Run each example.com Database as a StatefulSet with its Services and credentials",
		Long: `database-controller watches Databases (example.com/v1, through kube-apiserver) and the
StatefulSets, Services, Secrets and PodDisruptionBudgets it made for them (and every
PersistentVolumeClaim, which it finds by name), and reconciles each Database: its finalizer, credentials Secret, headless and client
Services, StatefulSet and PodDisruptionBudget, and its status. One replica works at a time,
elected on a Lease; /healthz, /readyz and /metrics are served over HTTP.`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 {
				return fmt.Errorf("unexpected arguments: %q", args)
			}
			// Logging first, so that everything after logs in the chosen format.
			if err := logsapi.ValidateAndApply(o.Logs, o.FeatureGates); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			defer logs.FlushLogs()
			config, err := o.Config()
			if err != nil {
				return err
			}
			return config.Run(cmd.Context())
		},
	}
	cmd.SetContext(ctx)

	fss := o.Flags()
	for _, fs := range fss.FlagSets {
		cmd.Flags().AddFlagSet(fs)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, fss, cols)
	return cmd
}

func metav1Duration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }
