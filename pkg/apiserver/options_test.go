package apiserver

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/pkg/apis/example"
	"example.com/database-apiserver/pkg/requestheader"
)

// Whatever --storage-media-type wrote, a server started with any other one
// reads it back: changing the flag keeps the stored Databases readable.
func TestStorageMediaTypesReadEachOther(t *testing.T) {
	mediaTypes := []string{runtime.ContentTypeJSON, runtime.ContentTypeYAML, runtime.ContentTypeProtobuf}
	codecs := map[string]runtime.Codec{}
	for _, mt := range mediaTypes {
		o := NewOptions(io.Discard, io.Discard)
		o.RecommendedOptions.Etcd.DefaultStorageMediaType = mt
		require.NoError(t, o.applyStorageMediaType())
		codecs[mt] = o.RecommendedOptions.Etcd.StorageConfig.Codec
	}
	db := &example.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", Labels: map[string]string{"a": "b"}},
		Spec: example.DatabaseSpec{Engine: example.EnginePostgreSQL, Version: "16", Replicas: ptr.To[int32](3),
			Storage: "10Gi", DeletionPolicy: example.DeletionPolicyRetain},
		Status: example.DatabaseStatus{Phase: example.DatabasePhaseReady, ReadyReplicas: 3, Selector: "x=y"},
	}
	for _, written := range mediaTypes {
		data, err := runtime.Encode(codecs[written], db)
		require.NoError(t, err)
		switch written {
		case runtime.ContentTypeProtobuf:
			require.True(t, bytes.HasPrefix(data, []byte("k8s\x00")), "%q", data)
		case runtime.ContentTypeJSON:
			require.True(t, bytes.HasPrefix(data, []byte(`{"kind":"Database","apiVersion":"example.com/v1"`)), "%s", data)
		case runtime.ContentTypeYAML:
			require.Contains(t, string(data), "apiVersion: example.com/v1\n")
		}
		for _, reader := range mediaTypes {
			got, err := runtime.Decode(codecs[reader], data)
			require.NoError(t, err, "written as %s, read as %s", written, reader)
			require.Equal(t, db.Spec, got.(*example.Database).Spec, "written as %s, read as %s", written, reader)
			require.Equal(t, db.Status, got.(*example.Database).Status, "written as %s, read as %s", written, reader)
			require.Equal(t, db.Labels, got.(*example.Database).Labels, "written as %s, read as %s", written, reader)
		}
	}
}

// Without --storage-media-type, Databases are written to etcd as protobuf.
func TestDefaultStorageMediaTypeIsProtobuf(t *testing.T) {
	o := NewOptions(io.Discard, io.Discard)
	require.NoError(t, o.applyStorageMediaType())
	data, err := runtime.Encode(o.RecommendedOptions.Etcd.StorageConfig.Codec, &example.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Spec:       example.DatabaseSpec{Engine: example.EngineMySQL, Version: "8.4"},
	})
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(data, []byte("k8s\x00")), "%q", data)
}

// A server started with --disable-admission-plugins=DatabaseDefaults refuses to start, naming
// the plugin, rather than answer every Database that omits spec.replicas or spec.storage with
// a 422; turning off another of our plugins is allowed.
func TestServerRequiresDatabaseDefaults(t *testing.T) {
	validate := func(args ...string) error {
		o := NewOptions(io.Discard, io.Discard)
		fs := pflag.NewFlagSet("database-apiserver", pflag.ContinueOnError)
		for _, set := range o.Flags().FlagSets {
			fs.AddFlagSet(set)
		}
		require.NoError(t, fs.Parse(append([]string{"--etcd-servers=http://127.0.0.1:2379"}, args...)))
		return o.Validate()
	}
	err := validate("--disable-admission-plugins=DatabaseDefaults")
	require.ErrorContains(t, err, "the DatabaseDefaults admission plugin is required")
	require.ErrorContains(t, err, "spec.replicas (1) and spec.storage (10Gi)")

	require.NoError(t, validate())
	require.NoError(t, validate("--disable-admission-plugins=DatabaseValidation"))
}

// --cluster-domain is cluster.local by default, a DNS subdomain, and what the server's
// configuration gives databases/connection; --dns-server, when set, is <host>:<port>.
func TestClusterDomain(t *testing.T) {
	parse := func(args ...string) *Options {
		o := NewOptions(io.Discard, io.Discard)
		fs := pflag.NewFlagSet("database-apiserver", pflag.ContinueOnError)
		for _, set := range o.Flags().FlagSets {
			fs.AddFlagSet(set)
		}
		require.NoError(t, fs.Parse(append([]string{"--etcd-servers=http://127.0.0.1:2379"}, args...)))
		return o
	}
	require.Equal(t, "cluster.local", parse().ClusterDomain)
	o := parse("--cluster-domain=corp.example.test")
	require.NoError(t, o.Validate())
	require.Equal(t, "corp.example.test", o.ClusterDomain)
	require.ErrorContains(t, parse("--cluster-domain=Not_A_Domain").Validate(), `--cluster-domain "Not_A_Domain"`)

	// --dns-server is empty (the system's resolver) by default, else <host>:<port>.
	require.Empty(t, parse().DNSServer)
	o = parse("--dns-server=10.245.0.1:53")
	require.NoError(t, o.Validate())
	require.Equal(t, "10.245.0.1:53", o.DNSServer)
	require.ErrorContains(t, parse("--dns-server=10.245.0.1").Validate(), `--dns-server "10.245.0.1": not <host>:<port>`)
}

// The options end watches on shutdown by default, so a server behind
// kube-apiserver stops in about a second rather than --request-timeout.
func TestDefaultShutdownWatchTerminationGracePeriod(t *testing.T) {
	o := NewOptions(nil, nil)
	require.Equal(t, DefaultShutdownWatchTerminationGracePeriod, o.ServerRun.ShutdownWatchTerminationGracePeriod)
	require.Positive(t, o.ServerRun.ShutdownWatchTerminationGracePeriod)
	fss := o.Flags()
	fs := fss.FlagSet("generic")
	require.Equal(t, DefaultShutdownWatchTerminationGracePeriod.String(), fs.Lookup("shutdown-watch-termination-grace-period").DefValue)
}

// With a requestheader configuration, the server's authenticator is requestheader's, in front
// of the delegated authentication it leaves every other request to; without one, it is left
// as it is.
func TestCacheRequestHeaderVerification(t *testing.T) {
	delegated := authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
		return &authenticator.Response{User: &user.DefaultInfo{Name: "delegated"}}, true, nil
	})
	c := genericapiserver.NewRecommendedConfig(Codecs)
	c.Authentication.Authenticator = delegated
	cacheRequestHeaderVerification(c)
	resp, ok, err := c.Authentication.Authenticator.AuthenticateRequest(&http.Request{Header: http.Header{}})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "delegated", resp.User.GetName())
	require.IsType(t, authenticator.RequestFunc(nil), c.Authentication.Authenticator)

	ca, err := dynamiccertificates.NewStaticCAContent("front-proxy", []byte(testCA))
	require.NoError(t, err)
	c.Authentication.RequestHeaderConfig = &authenticatorfactory.RequestHeaderConfig{
		UsernameHeaders:     headerrequest.StaticStringSlice{"X-Remote-User"},
		UIDHeaders:          headerrequest.StaticStringSlice{},
		GroupHeaders:        headerrequest.StaticStringSlice{},
		ExtraHeaderPrefixes: headerrequest.StaticStringSlice{},
		CAContentProvider:   ca,
		AllowedClientNames:  headerrequest.StaticStringSlice{},
	}
	cacheRequestHeaderVerification(c)
	require.IsType(t, &requestheader.Authenticator{}, c.Authentication.Authenticator)
	resp, ok, err = c.Authentication.Authenticator.AuthenticateRequest(&http.Request{Header: http.Header{"X-Remote-User": {"mallory"}}})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "delegated", resp.User.GetName(), "no client certificate: the delegate's answer")
}

// testCA is a self-signed CA certificate (ECDSA P-256) for a CA provider.
const testCA = `
-----BEGIN CERTIFICATE-----
MIIBbTCCAROgAwIBAgIBATAKBggqhkjOPQQDAjAeMRwwGgYDVQQDExN0ZXN0LWZy
b250LXByb3h5LWNhMB4XDTI2MDEwMTAwMDAwMFoXDTM2MDEwMTAwMDAwMFowHjEc
MBoGA1UEAxMTdGVzdC1mcm9udC1wcm94eS1jYTBZMBMGByqGSM49AgEGCCqGSM49
AwEHA0IABNkRO7cqY8riYgv1kCLABdilQsBYwa6GAq5ki4dBPCrHxchR+rw4khye
Mrh+bks+m4AHhKnlapbU8Y5U2lrb7j6jQjBAMA4GA1UdDwEB/wQEAwICBDAPBgNV
HRMBAf8EBTADAQH/MB0GA1UdDgQWBBQarqs/43iXRaJV60uAAzwm8dPPAjAKBggq
hkjOPQQDAgNIADBFAiEAj1jsxlE7JouyAxI60mA+RJATHistDSF5nf6hJfqFv00C
IH7xBJVPUUIzn9cU+IZrnDfEkcpKXpTiZ5ejJOB/2i6X
-----END CERTIFICATE-----
`
