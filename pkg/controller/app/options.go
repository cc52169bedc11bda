// Package app is the database-controller command: its options (flags grouped as Kubernetes
// components group them), the clients they configure, and Run: informers, the health and
// metrics server (HTTPS with delegated authentication and authorization, as
// kube-controller-manager serves its own), leader election on a Lease, and the Database
// controller's workers.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/server"
	apiserveroptions "k8s.io/apiserver/pkg/server/options"
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
	"example.com/database-apiserver/pkg/names"

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
	// DefaultSecurePort serves /healthz, /readyz and /metrics over HTTPS, on every address
	// (--bind-address 0.0.0.0).
	DefaultSecurePort = 8081
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
	// SecureServing is where /healthz, /readyz, /metrics and /debug/pprof are served over
	// HTTPS (--bind-address, --secure-port, 0 turns the server off) and with which
	// certificate: --tls-cert-file, else <--cert-dir>/database-controller.{crt,key}, else one
	// self-signed in memory at start.
	SecureServing *apiserveroptions.SecureServingOptions
	// Authentication authenticates the requests to the secure port: client certificates
	// (the cluster's client CA), bearer tokens (TokenReviews sent to kube-apiserver) and
	// front-proxy headers, as an aggregated API server does; anything else is anonymous.
	// --authentication-kubeconfig defaults to --kubeconfig.
	Authentication *apiserveroptions.DelegatingAuthenticationOptions
	// Authorization authorizes them: --authorization-always-allow-paths (the probes) and the
	// group system:masters without a question, everything else by a SubjectAccessReview
	// (GET /metrics needs the verb get on the non-resource URL /metrics).
	// --authorization-kubeconfig defaults to --kubeconfig.
	Authorization *apiserveroptions.DelegatingAuthorizationOptions
	// EnableProfiling serves /debug/pprof on the secure port (to authorized users).
	EnableProfiling bool
	// Namespace, when set, is the one namespace whose Databases the controller reconciles:
	// every informer lists and watches only there, so its RBAC may be a RoleBinding in that
	// namespace instead of a ClusterRoleBinding. What it writes in its own namespace (the
	// Lease, the release records, Events) is unchanged. Empty: every namespace.
	Namespace string
	// ImageRegistry, when set, is the registry (and path) the database images are pulled
	// from instead of the catalog's: "registry.example:5000/mirror" runs
	// "registry.example:5000/mirror/postgres:15" for "postgres:15".
	ImageRegistry string
	// ClusterDomain is the cluster's DNS domain (the kubelets' --cluster-domain): the hosts
	// of the credentials Secrets, the standbys' primary and the replica set members are
	// fully qualified names under it.
	ClusterDomain string
	// SuperuserSources are the address ranges (CIDR; an address alone is a range of one)
	// the controller's connections to the database servers come from: the engines'
	// superusers log in over the network from these only. Empty: from any address.
	SuperuserSources []string
	// Logs is the logging configuration (format, verbosity, ...).
	Logs *logsapi.LoggingConfiguration
	// FeatureGates holds the logging feature gates (--feature-gates).
	FeatureGates featuregate.MutableVersionedFeatureGate
}

// NewOptions returns the default options: 4 workers, a 10 minute resync, leader election on
// the Lease database-system/database-controller with Kubernetes components' timings, health
// probes and metrics over HTTPS on :8081 (a self-signed certificate in memory, delegated
// authentication and authorization, /healthz, /readyz and /livez open to all), protobuf at
// 100 QPS (burst 200) per client, text logs.
//
// The client-side limit is a backstop, not the throttle: the workers bound how many requests
// are in flight, and kube-apiserver's API Priority and Fairness protects it. At 20 QPS (burst
// 30) the controller spends most of its time waiting for its own rate limiter when many
// Databases arrive at once (hack/bench measures it).
func NewOptions() *Options {
	gates := featuregate.NewFeatureGate()
	utilruntime.Must(logsapi.AddFeatureGates(gates))
	secureServing := apiserveroptions.NewSecureServingOptions()
	secureServing.BindPort = DefaultSecurePort
	// No --cert-dir by default: the root filesystem is read-only in a real install, so the
	// self-signed certificate lives in memory, as kube-controller-manager's does.
	secureServing.ServerCert.CertDirectory = ""
	secureServing.ServerCert.PairName = database.ControllerName
	authentication := apiserveroptions.NewDelegatingAuthenticationOptions()
	authentication.RemoteKubeConfigFileOptional = true
	authorization := apiserveroptions.NewDelegatingAuthorizationOptions()
	authorization.RemoteKubeConfigFileOptional = true
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
		Workers:        DefaultWorkers,
		ClusterDomain:  names.DefaultClusterDomain,
		ResyncPeriod:   10 * time.Minute,
		SecureServing:  secureServing,
		Authentication: authentication,
		Authorization:  authorization,
		Logs:           logsapi.NewLoggingConfiguration(),
		FeatureGates:   gates,
	}
}

// Flags returns the flags of o in named sets, so --help prints them grouped.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets

	fs := fss.FlagSet("controller")
	fs.IntVar(&o.Workers, "workers", o.Workers, "How many Databases are reconciled concurrently.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace,
		"The one namespace whose Databases are reconciled; every list and watch stays in it. Empty: every namespace. "+
			"The default Lease name becomes "+DefaultLeaseName+"-<namespace>, so one controller per namespace can run side by side.")
	fs.StringVar(&o.ImageRegistry, "image-registry", o.ImageRegistry,
		"Registry and path to pull the database images from instead of the catalog's (e.g. registry.example:5000/mirror: postgres:15 becomes registry.example:5000/mirror/postgres:15), for a mirrored or air-gapped cluster.")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain,
		"The cluster's DNS domain (the kubelets' --cluster-domain). The hosts of the credentials Secrets, the standbys' primary and the replica set members are fully qualified names under it (<service>.<namespace>.svc.<domain>), which no Service of another namespace can answer for.")
	fs.StringSliceVar(&o.SuperuserSources, "superuser-sources", o.SuperuserSources,
		"Address ranges (CIDR, or single addresses) the controller's connections to the database servers come from, comma-separated. "+
			"The engines' superusers (PostgreSQL's postgres, MySQL's root) log in over the network from these only; empty: from any address. "+
			"IPv6 is taken as single addresses only (MySQL's accounts take no IPv6 netmask). "+
			"A change rolls the PostgreSQL Pods out (their client authentication rules) and changes MySQL's root accounts on the primary.")
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

	o.SecureServing.AddFlags(fss.FlagSet("secure serving"))
	o.Authentication.AddFlags(fss.FlagSet("authentication"))
	o.Authorization.AddFlags(fss.FlagSet("authorization"))

	fs = fss.FlagSet("health and debugging")
	fs.Var(healthProbeBindAddress{o.SecureServing}, "health-probe-bind-address",
		"host:port of the secure port, the same as --bind-address and --secure-port; 0 turns it off.")
	utilruntime.Must(fs.MarkDeprecated("health-probe-bind-address",
		"use --bind-address and --secure-port; /healthz, /readyz and /metrics are served over HTTPS"))
	fs.BoolVar(&o.EnableProfiling, "profiling", o.EnableProfiling,
		"Serve /debug/pprof on the secure port, to users authorized for it.")

	logsapi.AddFlags(o.Logs, fss.FlagSet("logs"))
	o.FeatureGates.AddFlag(fss.FlagSet("logs"))
	return fss
}

// Complete fills in what depends on other flags: with --namespace and the default
// --leader-elect-resource-name, the Lease is named database-controller-<namespace>, so each
// namespace's controller elects its own leader. NewCommand calls it before Validate.
func (o *Options) Complete() {
	if o.Namespace != "" && o.LeaderElection.ResourceName == DefaultLeaseName {
		o.LeaderElection.ResourceName = DefaultLeaseName + "-" + o.Namespace
	}
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
	if ns := o.Namespace; ns != "" {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, fmt.Errorf("--namespace %q: %s", ns, msg))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(o.ClusterDomain) {
		errs = append(errs, fmt.Errorf("--cluster-domain %q: %s", o.ClusterDomain, msg))
	}
	if _, err := o.SuperuserPrefixes(); err != nil {
		errs = append(errs, err)
	}
	if r := o.ImageRegistry; r != "" && !registryPattern.MatchString(r) {
		errs = append(errs, fmt.Errorf("--image-registry must be a registry host, optionally with a port and a path (registry.example:5000/mirror), without a scheme, tag or digest, got %q", r))
	}
	// SecureServingOptions.Validate reports an out-of-range port as if 0 were refused too.
	if port := o.SecureServing.BindPort; port < 0 || port > 65535 {
		errs = append(errs, fmt.Errorf("--secure-port must be from 0 (no server) to 65535, got %d", port))
	} else {
		errs = append(errs, o.SecureServing.Validate()...)
	}
	errs = append(errs, o.Authentication.Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
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

// SuperuserPrefixes is SuperuserSources as address ranges, an address alone as the range of
// that address only, each with its address masked. It fails on anything but an address or
// a CIDR range, and on an IPv6 range of more than one address.
func (o *Options) SuperuserPrefixes() ([]netip.Prefix, error) {
	var prefixes []netip.Prefix
	for _, v := range o.SuperuserSources {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			addr, aerr := netip.ParseAddr(v)
			if aerr != nil || addr.Zone() != "" {
				return nil, fmt.Errorf("--superuser-sources: %q is neither an IP address nor a CIDR range (10.0.0.1, 10.0.0.0/24)", v)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		if p.Addr().Is6() && p.Bits() != 128 {
			return nil, fmt.Errorf("--superuser-sources: %q: an IPv6 range must be a single address (/128): MySQL's accounts take no IPv6 netmask", v)
		}
		prefixes = append(prefixes, p.Masked())
	}
	return prefixes, nil
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
	// SecureServing is the listener and certificates of the health and metrics server; nil
	// when --secure-port is 0.
	SecureServing *server.SecureServingInfo
	// Authentication and Authorization guard every request to it.
	Authentication server.AuthenticationInfo
	Authorization  server.AuthorizationInfo
}

// Config builds the clients from the kubeconfig (or the in-cluster configuration) and the
// secure server (ApplyServing). It fails when the kubeconfig cannot be read or the server
// cannot be set up.
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
	c := &Config{
		Options:        o,
		Kube:           kube,
		Databases:      databases,
		LeaderElection: leClient,
		Identity:       hostname + "_" + string(uuid.NewUUID()),
	}
	if err := o.ApplyServing(c); err != nil {
		return nil, err
	}
	return c, nil
}

// ApplyServing sets up c's secure server unless --secure-port is 0: it listens (so a port in
// use fails the start), loads or generates the serving certificate (self-signed for
// localhost and 127.0.0.1 when neither --tls-cert-file nor a pair in --cert-dir is given),
// and builds the delegated authenticator and authorizer. They talk to kube-apiserver with
// --authentication-kubeconfig and --authorization-kubeconfig, which default to --kubeconfig
// (and, both empty, to the in-cluster configuration); the authenticator reads the client CA
// and the front-proxy settings from kube-system/extension-apiserver-authentication, and
// fails the start when it may not (unless --authentication-tolerate-lookup-failure).
func (o *Options) ApplyServing(c *Config) error {
	if o.SecureServing.BindPort == 0 && o.SecureServing.Listener == nil {
		return nil
	}
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.IPv4(127, 0, 0, 1)}); err != nil {
		return fmt.Errorf("generating a self-signed serving certificate: %w", err)
	}
	if err := o.SecureServing.ApplyTo(&c.SecureServing); err != nil {
		return fmt.Errorf("--secure-port: %w", err)
	}
	authentication := *o.Authentication
	if authentication.RemoteKubeConfigFile == "" {
		authentication.RemoteKubeConfigFile = o.ClientConnection.Kubeconfig
	}
	if err := authentication.ApplyTo(&c.Authentication, c.SecureServing, nil); err != nil {
		return fmt.Errorf("delegated authentication: %w", err)
	}
	authorization := *o.Authorization
	if authorization.RemoteKubeConfigFile == "" {
		authorization.RemoteKubeConfigFile = o.ClientConnection.Kubeconfig
	}
	if err := authorization.ApplyTo(&c.Authorization); err != nil {
		return fmt.Errorf("delegated authorization: %w", err)
	}
	return nil
}

// healthProbeBindAddress is the deprecated --health-probe-bind-address: host:port (an empty
// host is every address) sets --bind-address and --secure-port, "0" turns the server off.
type healthProbeBindAddress struct {
	s *apiserveroptions.SecureServingOptions
}

func (a healthProbeBindAddress) String() string {
	if a.s == nil {
		return ""
	}
	if a.s.BindPort == 0 {
		return "0"
	}
	host := ""
	if !a.s.BindAddress.IsUnspecified() {
		host = a.s.BindAddress.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(a.s.BindPort))
}

func (a healthProbeBindAddress) Set(v string) error {
	if v == "0" {
		a.s.BindPort = 0
		return nil
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	ip := net.IPv4zero
	if host != "" {
		if ip = net.ParseIP(host); ip == nil {
			return fmt.Errorf("host %q is not an IP address", host)
		}
	}
	a.s.BindAddress, a.s.BindPort = ip, n
	return nil
}

func (healthProbeBindAddress) Type() string { return "host:port" }

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
elected on a Lease; /healthz, /readyz and /metrics are served over HTTPS on --secure-port,
/metrics to users kube-apiserver authorizes for it (a SubjectAccessReview of get on the
non-resource URL /metrics), the probes to anyone.`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 {
				return fmt.Errorf("unexpected arguments: %q", args)
			}
			// Logging first, so that everything after logs in the chosen format.
			if err := logsapi.ValidateAndApply(o.Logs, o.FeatureGates); err != nil {
				return err
			}
			o.Complete()
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
