package app

import (
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// parse applies args to fresh default options, as the command does.
func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	for _, set := range o.Flags().FlagSets {
		fs.AddFlagSet(set)
	}
	require.NoError(t, fs.Parse(args))
	return o
}

func TestDefaultsElectOnTheLeaseInDatabaseSystem(t *testing.T) {
	o := parse(t)
	require.NoError(t, o.Validate())
	require.Equal(t, 4, o.Workers)
	require.True(t, o.LeaderElection.LeaderElect)
	require.Equal(t, "leases", o.LeaderElection.ResourceLock)
	require.Equal(t, "database-system", o.LeaderElection.ResourceNamespace)
	require.Equal(t, "database-controller", o.LeaderElection.ResourceName)
	require.Equal(t, 15*time.Second, o.LeaderElection.LeaseDuration.Duration)
	require.Equal(t, "0.0.0.0", o.SecureServing.BindAddress.String())
	require.Equal(t, 8081, o.SecureServing.BindPort)
	require.Empty(t, o.SecureServing.ServerCert.CertDirectory, "the self-signed certificate is kept in memory")
	require.Equal(t, []string{"/healthz", "/readyz", "/livez"}, o.Authorization.AlwaysAllowPaths)
	require.Equal(t, []string{"system:masters"}, o.Authorization.AlwaysAllowGroups)
	require.True(t, o.Authentication.RemoteKubeConfigFileOptional)
	require.True(t, o.Authorization.RemoteKubeConfigFileOptional)
	require.Equal(t, "application/vnd.kubernetes.protobuf", o.ClientConnection.ContentType)
	require.False(t, o.EnableProfiling)
	require.Equal(t, "cluster.local", o.ClusterDomain)
	sources, err := o.SuperuserPrefixes()
	require.NoError(t, err)
	require.Empty(t, sources, "the superusers from any address")
}

func TestFlagsSetOptions(t *testing.T) {
	o := parse(t, "--kubeconfig=/tmp/kc", "--workers=8", "--resync-period=1m",
		"--leader-elect=false", "--leader-elect-resource-namespace=ops", "--leader-elect-resource-name=db",
		"--bind-address=127.0.0.1", "--secure-port=9000", "--profiling",
		"--authentication-kubeconfig=/tmp/authn", "--authorization-kubeconfig=/tmp/authz",
		"--authorization-always-allow-paths=/healthz,/readyz",
		"--kube-api-qps=50", "--kube-api-burst=100", "--content-type=application/json",
		"--logging-format=json", "-v=4", "--image-registry=registry.example:5000/mirror")
	require.NoError(t, o.Validate())
	require.Equal(t, "registry.example:5000/mirror", o.ImageRegistry)
	require.Equal(t, "/tmp/kc", o.ClientConnection.Kubeconfig)
	require.Equal(t, 8, o.Workers)
	require.Equal(t, time.Minute, o.ResyncPeriod)
	require.False(t, o.LeaderElection.LeaderElect)
	require.Equal(t, "ops", o.LeaderElection.ResourceNamespace)
	require.Equal(t, "db", o.LeaderElection.ResourceName)
	require.Equal(t, "127.0.0.1", o.SecureServing.BindAddress.String())
	require.Equal(t, 9000, o.SecureServing.BindPort)
	require.Equal(t, "/tmp/authn", o.Authentication.RemoteKubeConfigFile)
	require.Equal(t, "/tmp/authz", o.Authorization.RemoteKubeConfigFile)
	require.Equal(t, []string{"/healthz", "/readyz"}, o.Authorization.AlwaysAllowPaths)
	require.True(t, o.EnableProfiling)
	require.Equal(t, float32(50), o.ClientConnection.QPS)
	require.Equal(t, int32(100), o.ClientConnection.Burst)
	require.Equal(t, "application/json", o.ClientConnection.ContentType)
	require.Equal(t, "json", o.Logs.Format)
}

func TestValidateNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workers=0"}, "--workers must be at least 1"},
		{[]string{"--resync-period=-1s"}, "--resync-period must not be negative"},
		{[]string{"--content-type=application/yaml"}, "--content-type must be"},
		{[]string{"--kube-api-qps=-1"}, "--kube-api-qps"},
		{[]string{"--secure-port=70000"}, "--secure-port must be from 0 (no server) to 65535, got 70000"},
		{[]string{"--leader-elect-resource-lock=configmaps"}, "--leader-elect-resource-lock must be \"leases\""},
		{[]string{"--leader-elect-resource-namespace=Bad_NS"}, "--leader-elect-resource-namespace"},
		{[]string{"--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=5s"},
			"--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"},
		{[]string{"--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=2s"},
			"--leader-elect-renew-deadline must be greater than"},
		{[]string{"--image-registry=https://registry.example"}, "--image-registry must be a registry host"},
		{[]string{"--image-registry=registry.example/mirror/postgres:15"}, "--image-registry must be a registry host"},
		{[]string{"--image-registry=Registry.Example"}, "--image-registry must be a registry host"},
		{[]string{"--cluster-domain=Cluster_Local"}, `--cluster-domain "Cluster_Local"`},
		{[]string{"--cluster-domain="}, `--cluster-domain ""`},
		{[]string{"--superuser-sources=10.0.0.0/33"}, `--superuser-sources: "10.0.0.0/33" is neither an IP address nor a CIDR range`},
		{[]string{"--superuser-sources=controller.example"}, `--superuser-sources: "controller.example" is neither`},
		{[]string{"--superuser-sources=fe80::1%eth0"}, `--superuser-sources: "fe80::1%eth0" is neither`},
		{[]string{"--superuser-sources=fd00::/64"}, `--superuser-sources: "fd00::/64": an IPv6 range must be a single address (/128)`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			err := parse(t, tc.args...).Validate()
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestLeaderElectionTimingsAreNotCheckedWhenItIsOff(t *testing.T) {
	o := parse(t, "--leader-elect=false", "--leader-elect-lease-duration=1s", "--leader-elect-renew-deadline=5s")
	require.NoError(t, o.Validate())
}

// TestDeprecatedHealthProbeBindAddressSetsTheSecurePort: the flag of earlier releases still
// parses, as --bind-address and --secure-port (an empty host is every address).
func TestDeprecatedHealthProbeBindAddressSetsTheSecurePort(t *testing.T) {
	o := parse(t, "--health-probe-bind-address=127.0.0.1:9000")
	require.Equal(t, "127.0.0.1", o.SecureServing.BindAddress.String())
	require.Equal(t, 9000, o.SecureServing.BindPort)
	o = parse(t, "--bind-address=127.0.0.1", "--health-probe-bind-address=:8082")
	require.Equal(t, "0.0.0.0", o.SecureServing.BindAddress.String())
	require.Equal(t, 8082, o.SecureServing.BindPort)
	require.Equal(t, 0, parse(t, "--health-probe-bind-address=0").SecureServing.BindPort)
	for _, bad := range []string{"8081", "localhost:8081", ":http", ":70000"} {
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		for _, set := range NewOptions().Flags().FlagSets {
			fs.AddFlagSet(set)
		}
		require.ErrorContains(t, fs.Parse([]string{"--health-probe-bind-address=" + bad}), "health-probe-bind-address", bad)
	}
}

func TestImageRegistryTakesHostsPortsAndPaths(t *testing.T) {
	for _, r := range []string{"", "registry.example", "10.0.0.1:5000", "registry.example:5000/mirror/", "r.example/a/b-c.d_e"} {
		require.NoError(t, parse(t, "--image-registry="+r).Validate(), r)
	}
}

// --superuser-sources takes CIDR ranges and single addresses (a range of one), masked;
// --cluster-domain a DNS subdomain.
func TestSuperuserSourcesAndClusterDomain(t *testing.T) {
	o := parse(t, "--superuser-sources=10.245.0.1,10.244.7.9/16,fd00::7", "--superuser-sources=192.168.0.0/24", "--cluster-domain=corp.example.test")
	require.NoError(t, o.Validate())
	require.Equal(t, "corp.example.test", o.ClusterDomain)
	sources, err := o.SuperuserPrefixes()
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("10.245.0.1/32"), netip.MustParsePrefix("10.244.0.0/16"),
		netip.MustParsePrefix("fd00::7/128"), netip.MustParsePrefix("192.168.0.0/24"),
	}, sources)
}
