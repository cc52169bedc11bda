// Package apiserver wires database-apiserver: Options (flags) become a Config,
// a Config is completed into a CompletedConfig, and New installs the
// example.com API group on a k8s.io/apiserver GenericAPIServer.
package apiserver

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/managedfields"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/builder3"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	openapiutil "k8s.io/kube-openapi/pkg/util"

	"example.com/database-apiserver/pkg/apis/example"
	"example.com/database-apiserver/pkg/apis/example/install"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
	"example.com/database-apiserver/pkg/objectstore"
	databasestorage "example.com/database-apiserver/pkg/registry/example/database/storage"
	"example.com/database-apiserver/pkg/registry/example/databasebackup"
	"example.com/database-apiserver/pkg/registry/unavailable"
)

var (
	// Scheme holds every type the server reads or writes: example.com
	// (internal and v1), autoscaling Scale, and the meta types.
	Scheme = runtime.NewScheme()
	// Codecs encodes and decodes the types of Scheme.
	Codecs = serializer.NewCodecFactory(Scheme)
	// NegotiatedSerializer is what the server offers clients: JSON, YAML and
	// protobuf (application/vnd.kubernetes.protobuf, and its stream form for
	// watches) for every kind it serves: Database and DatabaseList have
	// generated protobuf marshalling (pkg/apis/example/v1/generated.pb.go),
	// Scale is autoscaling/v1's, and the meta types are apimachinery's.
	//
	// Every kind served must marshal as protobuf: a client that lists
	// protobuf first (Accept: protobuf, json, as the namespace controller and
	// other clients preferring protobuf send) otherwise gets "object does not
	// implement the protobuf marshalling interface" instead of JSON. Keep
	// generated.pb.go current (make generate) when the types change.
	NegotiatedSerializer runtime.NegotiatedSerializer = Codecs
)

func init() {
	install.Install(Scheme)

	// The generic server decodes the options of every request (ListOptions,
	// DeleteOptions, ...) as meta/v1, whatever the group.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	Scheme.AddUnversionedTypes(schema.GroupVersion{Group: "", Version: "v1"},
		&metav1.Status{},
		&metav1.APIVersions{},
		&metav1.APIGroupList{},
		&metav1.APIGroup{},
		&metav1.APIResourceList{},
	)
}

// ExtraConfig is the configuration of database-apiserver beyond the generic server's.
type ExtraConfig struct {
	// ClusterDomain is the cluster's DNS domain, which the hosts databases/connection shows
	// end with; empty is names.DefaultClusterDomain.
	ClusterDomain string
	// DNSServer is the DNS server ("<host>:<port>") that resolves the names of backup
	// stores; empty: the system's resolver.
	DNSServer string
	// KubeClient reads the backup stores' Secrets from kube-apiserver; nil (no --kubeconfig
	// and not in a cluster) makes databasebackups answer 503. Config sets it from the
	// generic server's client configuration.
	KubeClient kubernetes.Interface
}

// Config is the whole configuration of database-apiserver.
type Config struct {
	GenericConfig *genericapiserver.RecommendedConfig
	ExtraConfig   ExtraConfig
}

type completedConfig struct {
	GenericConfig genericapiserver.CompletedConfig
	ExtraConfig   *ExtraConfig
}

// CompletedConfig is a Config with every default filled in. It wraps a
// private struct so that only Config.Complete can make one.
type CompletedConfig struct {
	*completedConfig
}

// DatabaseServer is the running database-apiserver.
type DatabaseServer struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
}

// Complete fills in the defaults of cfg, which it mutates.
func (cfg *Config) Complete() CompletedConfig {
	if cfg.ExtraConfig.KubeClient == nil && cfg.GenericConfig.ClientConfig != nil {
		// Secret reads serve users' requests: not client-go's default 5 per second.
		kubeConfig := restclient.CopyConfig(cfg.GenericConfig.ClientConfig)
		kubeConfig.QPS, kubeConfig.Burst = 50, 100
		if client, err := kubernetes.NewForConfig(kubeConfig); err == nil {
			cfg.ExtraConfig.KubeClient = client
		}
	}
	return CompletedConfig{&completedConfig{
		GenericConfig: cfg.GenericConfig.Complete(),
		ExtraConfig:   &cfg.ExtraConfig,
	}}
}

// New builds the server and installs example.com/v1: databases and its
// status, scale, connection, restart, switchover and backup subresources. It returns an error when the storage
// cannot be built or the group cannot be installed (e.g. incomplete OpenAPI).
func (c completedConfig) New() (*DatabaseServer, error) {
	genericServer, err := c.GenericConfig.New("database-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}

	apiGroupInfo := genericapiserver.NewDefaultAPIGroupInfo(example.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	apiGroupInfo.NegotiatedSerializer = NegotiatedSerializer

	typeConverter, err := databaseTypeConverter(c.GenericConfig.OpenAPIV3Config)
	if err != nil {
		return nil, err
	}
	// An unreachable etcd is a 503 with Retry-After, not a 500 or a hang.
	domain := c.ExtraConfig.ClusterDomain
	if domain == "" {
		domain = names.DefaultClusterDomain
	}
	databases, err := databasestorage.NewStorage(Scheme, unavailable.RESTOptionsGetter(c.GenericConfig.RESTOptionsGetter), typeConverter, domain)
	if err != nil {
		return nil, fmt.Errorf("building databases storage: %w", err)
	}
	backups := c.databaseBackups(databases.Database)
	// A restore's source backups are read from the store at creation.
	databases.Database.SourceBackups = func(ctx context.Context, db *example.Database) ([]time.Time, error) {
		var v1db examplev1.Database
		if err := Scheme.Convert(db, &v1db, nil); err != nil {
			return nil, err
		}
		return backups.RecoverableFrom(ctx, &v1db)
	}
	apiGroupInfo.VersionedResourcesStorageMap[examplev1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"databases":            databases.Database,
		"databases/status":     databases.Status,
		"databases/scale":      databases.Scale,
		"databases/connection": databases.Connection,
		"databases/restart":    databases.Restart,
		"databases/backup":     databases.Backup,
		"databases/switchover": databases.Switchover,
		"databasebackups":      backups,
	}
	if err := genericServer.InstallAPIGroup(&apiGroupInfo); err != nil {
		return nil, err
	}
	// /readyz/poststarthook/storage-readiness fails until the watch cache of databases is
	// initialised (or StorageInitializationTimeout has passed), as kube-apiserver registers
	// it: until then k8s.io/apiserver answers a list 429 "storage is (re)initializing", which
	// the readiness probe keeps clients from.
	if err := genericServer.AddPostStartHook("storage-readiness", genericServer.StorageReadinessHook.Hook); err != nil {
		return nil, err
	}
	return &DatabaseServer{GenericAPIServer: genericServer}, nil
}

// databaseBackups is the storage of databasebackups: the Databases as this server serves
// them, the stores' Secrets read from kube-apiserver with the server's own identity (the
// request was authorized to read the namespace's backups), and each store reached with
// minio-go through ExtraConfig.DNSServer. Without ExtraConfig.KubeClient, every
// request is a 503 saying so.
func (c completedConfig) databaseBackups(databases rest.Lister) *databasebackup.REST {
	list := func(ctx context.Context, namespace string) ([]examplev1.Database, error) {
		obj, err := databases.List(genericapirequest.WithNamespace(ctx, namespace), &metainternalversion.ListOptions{})
		if err != nil {
			return nil, err
		}
		internal := obj.(*example.DatabaseList)
		dbs := make([]examplev1.Database, len(internal.Items))
		for i := range internal.Items {
			if err := Scheme.Convert(&internal.Items[i], &dbs[i], nil); err != nil {
				return nil, err
			}
		}
		return dbs, nil
	}
	var secrets databasebackup.Secrets = func(context.Context, string, string) (*corev1.Secret, error) {
		return nil, apierrors.NewServiceUnavailable("this server has no client of kube-apiserver (--kubeconfig) to read the stores' Secrets")
	}
	if client := c.ExtraConfig.KubeClient; client != nil {
		secrets = func(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
			return client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		}
	}
	resolver := resolverOf(c.ExtraConfig.DNSServer)
	open := func(store *engine.BackupStore, secret *corev1.Secret) (engine.ObjectStore, error) {
		return objectstore.New(objectstore.Config{
			Host: store.Host, Port: store.Port, Bucket: store.Bucket, Region: store.Region,
			AccessKeyID:     string(secret.Data[examplev1.BackupSecretKeyAccessKeyID]),
			SecretAccessKey: string(secret.Data[examplev1.BackupSecretKeySecretAccessKey]),
			CA:              secret.Data[examplev1.BackupSecretKeyCA],
			Resolver:        resolver,
		})
	}
	return databasebackup.NewREST(list, secrets, open)
}

// resolverOf is a resolver that asks the DNS server server ("<host>:<port>"); nil (the
// system's) for "".
func resolverOf(server string) *net.Resolver {
	if server == "" {
		return nil
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}
}

// databaseTypeConverter returns the schema of the example.com/v1 Database (and of what
// it refers to) for field managers, built from the server's OpenAPI v3 definitions as
// k8s.io/apiserver builds the one of an API group it installs. It fails when config is
// nil or misses a definition.
func databaseTypeConverter(config *openapicommon.OpenAPIV3Config) (managedfields.TypeConverter, error) {
	if config == nil {
		return nil, fmt.Errorf("the OpenAPI v3 config must be set: server-side field management needs it")
	}
	spec, err := builder3.BuildOpenAPIDefinitionsForResources(config, openapiutil.GetCanonicalTypeName(&examplev1.Database{}))
	if err != nil {
		return nil, fmt.Errorf("building the OpenAPI models of Database: %w", err)
	}
	return managedfields.NewTypeConverter(spec, false)
}
