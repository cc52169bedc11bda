package apiserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	dbadmission "example.com/database-apiserver/pkg/admission"
	"example.com/database-apiserver/pkg/admission/databasedefaults"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/authnready"
	generatedopenapi "example.com/database-apiserver/pkg/generated/openapi"
	"example.com/database-apiserver/pkg/names"
	databasestorage "example.com/database-apiserver/pkg/registry/example/database/storage"
	"example.com/database-apiserver/pkg/requestheader"

	// JSON log format (--logging-format=json).
	_ "k8s.io/component-base/logs/json/register"
)

// DefaultEtcdPathPrefix is the etcd key prefix. The generic store appends
// <group>/<resource>, so a Database lives at
// /registry/example.com/databases/<namespace>/<name>.
const DefaultEtcdPathPrefix = "/registry"

// DefaultShutdownWatchTerminationGracePeriod is the default of
// --shutdown-watch-termination-grace-period: how long a shutting-down server
// waits for the watches it ends to drain. k8s.io/apiserver's default, 0, does
// not end watches at all, so the HTTP server's shutdown waits --request-timeout
// (60s) for every watch kube-apiserver proxies (the controller's and the
// garbage collector's are always open) and then fails with "context deadline
// exceeded". Watch clients (reflectors) resume from their last resourceVersion
// on another server, so ending their watches loses nothing.
const DefaultShutdownWatchTerminationGracePeriod = 2 * time.Second

func init() {
	utilruntime.Must(logsapi.AddFeatureGates(utilfeature.DefaultMutableFeatureGate))
}

// Options are the command-line options of database-apiserver: the generic
// server's run options, k8s.io/apiserver's RecommendedOptions (etcd, secure
// serving, delegated authentication and authorization, audit, features, core
// API, admission, egress, tracing) and logging.
type Options struct {
	ServerRun          *genericoptions.ServerRunOptions
	RecommendedOptions *genericoptions.RecommendedOptions
	Logs               *logsapi.LoggingConfiguration

	// AlternateDNS are extra names for the self-signed serving certificate
	// made when no --tls-cert-file is given.
	AlternateDNS []string

	// ClusterDomain is the cluster's DNS domain (--cluster-domain), which the hosts
	// databases/connection shows end with, as the controller's --cluster-domain makes the
	// credentials Secrets' (names.ServiceHost).
	ClusterDomain string

	// DNSServer is the DNS server ("<host>:<port>") that resolves backup stores' names
	// (--dns-server); empty: the system's resolver.
	DNSServer string

	StdOut io.Writer
	StdErr io.Writer
}

// NewOptions returns Options with the defaults of database-apiserver: objects
// stored as example.com/v1 protobuf under DefaultEtcdPathPrefix (as
// kube-apiserver stores its built-in types), and our admission plugins and
// ResourceQuota registered, ordered in the chain and given what they need.
func NewOptions(out, errOut io.Writer) *Options {
	o := &Options{
		ServerRun: genericoptions.NewServerRunOptions(),
		RecommendedOptions: genericoptions.NewRecommendedOptions(
			DefaultEtcdPathPrefix,
			Codecs.LegacyCodec(examplev1.SchemeGroupVersion),
		),
		Logs:          logsapi.NewLoggingConfiguration(),
		ClusterDomain: names.DefaultClusterDomain,
		StdOut:        out,
		StdErr:        errOut,
	}
	o.ServerRun.ShutdownWatchTerminationGracePeriod = DefaultShutdownWatchTerminationGracePeriod
	o.RecommendedOptions.Etcd.StorageConfig.EncodeVersioner = runtime.NewMultiGroupVersioner(
		examplev1.SchemeGroupVersion, schema.GroupKind{Group: examplev1.GroupName})
	o.RecommendedOptions.Etcd.DefaultStorageMediaType = runtime.ContentTypeProtobuf

	dbadmission.RegisterAllAdmissionPlugins(o.RecommendedOptions.Admission.Plugins)
	o.RecommendedOptions.ExtraAdmissionInitializers = dbadmission.ExtraAdmissionInitializers
	o.RecommendedOptions.Admission.RecommendedPluginOrder =
		dbadmission.RecommendedPluginOrder(o.RecommendedOptions.Admission.RecommendedPluginOrder)
	return o
}

// Flags returns the flags of o in named sets, so --help prints them grouped.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	o.ServerRun.AddUniversalFlags(fss.FlagSet("generic"))
	o.RecommendedOptions.Etcd.AddFlags(fss.FlagSet("etcd"))
	o.RecommendedOptions.SecureServing.AddFlags(fss.FlagSet("secure serving"))
	o.RecommendedOptions.Authentication.AddFlags(fss.FlagSet("authentication"))
	o.RecommendedOptions.Authorization.AddFlags(fss.FlagSet("authorization"))
	o.RecommendedOptions.Audit.AddFlags(fss.FlagSet("auditing"))
	o.RecommendedOptions.Features.AddFlags(fss.FlagSet("features"))
	o.RecommendedOptions.CoreAPI.AddFlags(fss.FlagSet("core api"))
	o.RecommendedOptions.Admission.AddFlags(fss.FlagSet("admission"))
	o.RecommendedOptions.EgressSelector.AddFlags(fss.FlagSet("egress selector"))
	o.RecommendedOptions.Traces.AddFlags(fss.FlagSet("traces"))
	logsapi.AddFlags(o.Logs, fss.FlagSet("logs"))
	fss.FlagSet("databases").StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain,
		"The cluster's DNS domain (the kubelets' --cluster-domain): databases/connection shows the hosts of a Database as fully qualified names under it (<service>.<namespace>.svc.<domain>). Give database-controller the same --cluster-domain.")
	fss.FlagSet("databases").StringVar(&o.DNSServer, "dns-server", o.DNSServer,
		"The DNS server (<host>:<port>) that resolves the names of backup stores, which databasebackups reads; empty: the system's resolver. For a server run outside the cluster's network whose stores have cluster names.")
	return fss
}

// Complete fills in what the flags left out: the advertise address, from the
// secure serving options.
func (o *Options) Complete() error {
	if err := o.ServerRun.DefaultAdvertiseAddress(o.RecommendedOptions.SecureServing.SecureServingOptions); err != nil {
		return err
	}
	return o.ServerRun.Complete()
}

// Validate returns every problem with the options at once. The logging
// options are validated when NewCommand applies them, once per process.
func (o *Options) Validate() error {
	var errs []error
	errs = append(errs, o.ServerRun.Validate()...)
	errs = append(errs, o.RecommendedOptions.Validate()...)
	errs = append(errs, o.validateRequiredAdmission()...)
	if o.DNSServer != "" {
		if _, _, err := net.SplitHostPort(o.DNSServer); err != nil {
			errs = append(errs, fmt.Errorf("--dns-server %q: not <host>:<port>: %v", o.DNSServer, err))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(o.ClusterDomain) {
		errs = append(errs, fmt.Errorf("--cluster-domain %q: %s", o.ClusterDomain, msg))
	}
	return utilerrors.NewAggregate(errs)
}

// validateRequiredAdmission refuses a server without the DatabaseDefaults admission plugin
// (turned off with --disable-admission-plugins): it is the one place spec.replicas and
// spec.storage get their defaults, which validation then requires and the controller acts
// on, so without it every Database that omits them would be refused.
func (o *Options) validateRequiredAdmission() []error {
	a := o.RecommendedOptions.Admission
	if a != nil && !slices.Contains(a.DisablePlugins, databasedefaults.PluginName) {
		return nil
	}
	return []error{fmt.Errorf(
		"the %s admission plugin is required: it gives a Database that omits them spec.replicas (%d) and spec.storage (%s), which validation requires and the controller acts on; do not disable it (--admission-control-config-file can change its defaults)",
		databasedefaults.PluginName, databasedefaults.DefaultReplicas, databasedefaults.DefaultStorage)}
}

// Config turns the options into a server Config. It makes a self-signed
// serving certificate when none is given, and fails when a kubeconfig or
// certificate cannot be read or an admission configuration is invalid.
func (o *Options) Config() (*Config, error) {
	if err := o.RecommendedOptions.SecureServing.MaybeDefaultWithSelfSignedCerts(
		"localhost", o.AlternateDNS, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("creating self-signed certificates: %w", err)
	}

	serverConfig := genericapiserver.NewRecommendedConfig(Codecs)
	serverConfig.Serializer = NegotiatedSerializer

	namer := openapi.NewDefinitionNamer(Scheme)
	serverConfig.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(generatedopenapi.GetOpenAPIDefinitions, namer)
	serverConfig.OpenAPIConfig.Info.Title = "database-apiserver"
	serverConfig.OpenAPIConfig.Info.Version = examplev1.SchemeGroupVersion.Version
	serverConfig.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(generatedopenapi.GetOpenAPIDefinitions, namer)
	serverConfig.OpenAPIV3Config.Info.Title = "database-apiserver"
	serverConfig.OpenAPIV3Config.Info.Version = examplev1.SchemeGroupVersion.Version

	if err := o.ServerRun.ApplyTo(&serverConfig.Config); err != nil {
		return nil, err
	}
	if err := o.applyStorageMediaType(); err != nil {
		return nil, err
	}
	if err := o.RecommendedOptions.ApplyTo(serverConfig); err != nil {
		return nil, err
	}
	cacheRequestHeaderVerification(serverConfig)
	gateOnRequestHeaderCA(serverConfig)
	checkPatchFieldTypes(serverConfig)
	passUserAgent(serverConfig)
	return &Config{GenericConfig: serverConfig, ExtraConfig: ExtraConfig{ClusterDomain: o.ClusterDomain, DNSServer: o.DNSServer}}, nil
}

// checkPatchFieldTypes refuses patches of databases whose fields have values
// of the wrong type with a 422 (withPatchFieldTypes). The check runs last in
// the handler chain, after authentication, authorization and priority and
// fairness, just before the request reaches the API handlers.
func checkPatchFieldTypes(serverConfig *genericapiserver.RecommendedConfig) {
	build := serverConfig.BuildHandlerChainFunc
	serverConfig.BuildHandlerChainFunc = func(handler http.Handler, c *genericapiserver.Config) http.Handler {
		return build(withPatchFieldTypes(handler, c.Serializer, c.MaxRequestBodyBytes), c)
	}
}

// passUserAgent puts the User-Agent of each request in its context
// (databasestorage.WithUserAgent), from which databases/switchover names the field
// manager of a request without fieldManager, as k8s.io/apiserver's handlers do.
func passUserAgent(serverConfig *genericapiserver.RecommendedConfig) {
	build := serverConfig.BuildHandlerChainFunc
	serverConfig.BuildHandlerChainFunc = func(handler http.Handler, c *genericapiserver.Config) http.Handler {
		return build(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			handler.ServeHTTP(w, req.WithContext(databasestorage.WithUserAgent(req.Context(), req.UserAgent())))
		}), c)
	}
}

// cacheRequestHeaderVerification puts requestheader.Authenticator in front of the delegated
// authentication: a request proxied by kube-apiserver (kube-aggregator) is authenticated from
// its headers once its client certificate chain verified against the front-proxy CA, and that
// verification is remembered per chain and CA bundle, instead of verified again on every
// request by k8s.io/apiserver's request-header authenticator. Everything else is left to the
// delegated authentication, which answers as before. Without a requestheader configuration
// nothing changes.
func cacheRequestHeaderVerification(serverConfig *genericapiserver.RecommendedConfig) {
	authn := &serverConfig.Authentication
	if authn.RequestHeaderConfig == nil || authn.Authenticator == nil {
		return
	}
	authn.Authenticator = requestheader.NewAuthenticator(authn.RequestHeaderConfig, authn.Authenticator)
}

// RequestHeaderCACheckName is the /readyz check (/readyz/requestheader-client-ca)
// that fails until the front-proxy CA is loaded.
const RequestHeaderCACheckName = "requestheader-client-ca"

// gateOnRequestHeaderCA keeps /readyz false, and answers other requests with a
// 503 and Retry-After, until the front-proxy CA the delegated authentication
// trusts (kube-apiserver's --requestheader-client-ca-file, read from the
// ConfigMap kube-system/extension-apiserver-authentication unless
// --requestheader-client-ca-file is given) is loaded and the TLS configuration
// asks for it: until then every request kube-apiserver proxies would
// authenticate as system:anonymous (authnready.CA). Requests on a connection
// made before then that sent no client certificate get the 503 too, which
// closes it. Without a requestheader
// configuration (no authentication kubeconfig, --authentication-skip-lookup)
// nothing is gated.
func gateOnRequestHeaderCA(serverConfig *genericapiserver.RecommendedConfig) {
	ready := authnready.FrontProxyCA(RequestHeaderCACheckName, serverConfig.SecureServing, &serverConfig.Authentication)
	if ready.Provider == nil {
		return
	}
	serverConfig.AddReadyzChecks(ready.HealthCheck())
	if serverConfig.SecureServing != nil {
		serverConfig.SecureServing.Listener = ready.Listen(serverConfig.SecureServing.Listener)
	}
	build := serverConfig.BuildHandlerChainFunc
	serverConfig.BuildHandlerChainFunc = func(handler http.Handler, c *genericapiserver.Config) http.Handler {
		return ready.Gate(build(handler, c), c.Serializer)
	}
}

// applyStorageMediaType makes --storage-media-type (default protobuf) choose how
// Databases are written to etcd; RecommendedOptions alone would store every
// resource with the one codec of StorageConfig. Reads decode whatever is stored
// (JSON, YAML or protobuf), so changing the flag on a server with data keeps it
// readable; objects are rewritten in the new format as they are written.
// Protobuf costs our server about 10% less CPU per write than JSON (decode and
// encode, docs/benchmarks.md); JSON is for reading etcd with etcdctl as is.
// It returns an error for a media type the server has no serializer for.
func (o *Options) applyStorageMediaType() error {
	mediaType := o.RecommendedOptions.Etcd.DefaultStorageMediaType
	info, ok := runtime.SerializerInfoForMediaType(Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		return fmt.Errorf("--storage-media-type %q is not supported", mediaType)
	}
	o.RecommendedOptions.Etcd.StorageConfig.Codec = Codecs.CodecForVersions(
		info.Serializer, Codecs.UniversalDeserializer(),
		schema.GroupVersions{examplev1.SchemeGroupVersion}, runtime.InternalGroupVersioner)
	return nil
}

// Run builds the server from o and serves until ctx is cancelled, then shuts
// down gracefully (--shutdown-delay-duration, in-flight requests drained).
func (o *Options) Run(ctx context.Context) error {
	config, err := o.Config()
	if err != nil {
		return err
	}
	server, err := config.Complete().New()
	if err != nil {
		return err
	}
	return server.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}

// NewCommand returns the database-apiserver cobra command for o; it runs the
// server until ctx is cancelled.
func NewCommand(ctx context.Context, o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "database-apiserver",
		Short: "Serve the example.com Database API from its own etcd, behind kube-apiserver's aggregator",
		Long: `database-apiserver serves databases.example.com/v1 (with the status and scale
subresources) from its own etcd. kube-apiserver proxies to it through the
APIService v1.example.com; authentication and authorization are delegated to
kube-apiserver, and an in-tree admission chain defaults and validates Databases.`,
		SilenceUsage: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// Feature gates and emulation versions take effect once flags are parsed.
			return o.ServerRun.ComponentGlobalsRegistry.Set()
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 {
				return fmt.Errorf("unexpected arguments: %q", args)
			}
			// Logging first, so that everything after logs in the chosen format.
			if err := logsapi.ValidateAndApply(o.Logs, utilfeature.DefaultFeatureGate); err != nil {
				return err
			}
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			defer logs.FlushLogs()
			klog.FromContext(cmd.Context()).Info("Starting database-apiserver")
			return o.Run(cmd.Context())
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
