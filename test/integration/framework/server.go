// Package framework starts database-apiserver in-process on a real embedded
// etcd for integration tests. No kube-apiserver is involved: requests are
// authenticated with the server's own loopback credentials (a privileged
// token), and the admission plugins that need kube-apiserver
// (NamespaceLifecycle, the webhook and admission-policy plugins) are off.
// The end-to-end tests in test/e2e run the whole chain.
package framework

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"example.com/database-apiserver/internal/embedetcd"
	"example.com/database-apiserver/pkg/apiserver"
)

// pluginsNeedingKubeAPIServer are the standard admission plugins that read
// from kube-apiserver; they cannot run without one.
var pluginsNeedingKubeAPIServer = []string{
	"NamespaceLifecycle",
	"MutatingAdmissionWebhook",
	"ValidatingAdmissionWebhook",
	"ValidatingAdmissionPolicy",
	"MutatingAdmissionPolicy",
	"ResourceQuota",
}

// TestServer is a running database-apiserver with its etcd.
type TestServer struct {
	// ClientConfig reaches the server as a privileged user over TLS.
	ClientConfig *rest.Config
	// EtcdURL is the etcd's client URLs, separated by commas, for reading raw keys.
	EtcdURL string

	dir string
	// ownEtcd says the server runs etcd (etcd, nil while stopped), not the caller.
	ownEtcd bool
	etcd    *embedetcd.Server
	cancel  context.CancelFunc
	done    chan error
}

// Options says which etcd the server uses and where it listens.
type Options struct {
	// EtcdServers are the client URLs of an etcd the caller runs; empty means
	// an embedded etcd of the server's own, started and stopped with it.
	EtcdServers []string
	// Port is the loopback port the server listens on; 0 picks a free one.
	Port int
}

// Start starts etcd and database-apiserver, with extraFlags appended to the
// server's command line (e.g. "--admission-control-config-file=..."), and
// waits for /readyz. Stop must be called to release both.
func Start(extraFlags ...string) (*TestServer, error) {
	return StartWith(Options{}, extraFlags...)
}

// StartWith is Start with the etcd and the port opts gives.
func StartWith(opts Options, extraFlags ...string) (*TestServer, error) {
	dir, err := os.MkdirTemp("", "database-apiserver-integration-")
	if err != nil {
		return nil, err
	}
	s := &TestServer{dir: dir, done: make(chan error, 1)}
	if err := s.start(opts, extraFlags); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *TestServer) start(opts Options, extraFlags []string) error {
	s.EtcdURL = strings.Join(opts.EtcdServers, ",")
	if len(opts.EtcdServers) == 0 {
		s.ownEtcd = true
		var err error
		s.etcd, err = embedetcd.Start(embedetcd.Options{DataDir: filepath.Join(s.dir, "etcd")})
		if err != nil {
			return err
		}
		s.EtcdURL = s.etcd.ClientURL
	}

	listener, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.Port)))
	if err != nil {
		return err
	}
	o := apiserver.NewOptions(os.Stdout, os.Stderr)
	o.RecommendedOptions.SecureServing.Listener = listener
	o.RecommendedOptions.SecureServing.BindPort = listener.Addr().(*net.TCPAddr).Port
	o.RecommendedOptions.Authentication.RemoteKubeConfigFileOptional = true
	o.RecommendedOptions.Authorization.RemoteKubeConfigFileOptional = true
	o.RecommendedOptions.CoreAPI = nil
	// API Priority and Fairness reads its configuration from kube-apiserver.
	o.RecommendedOptions.Features.EnablePriorityAndFairness = false
	o.RecommendedOptions.Admission.DisablePlugins = pluginsNeedingKubeAPIServer

	fs := pflag.NewFlagSet("database-apiserver", pflag.ContinueOnError)
	for _, set := range o.Flags().FlagSets {
		fs.AddFlagSet(set)
	}
	args := append([]string{
		"--etcd-servers=" + s.EtcdURL,
		"--cert-dir=" + filepath.Join(s.dir, "certs"),
		"--bind-address=127.0.0.1",
		"--shutdown-delay-duration=0s",
		"--shutdown-watch-termination-grace-period=0s",
	}, extraFlags...)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := o.ServerRun.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	if err := o.Complete(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	// RecommendedOptions wires admission only with a kube-apiserver client
	// and informers, although none of the plugins left on reads them. Apply
	// the same admission options (flags, plugin order, config file) with an
	// empty fake clientset in their place.
	admissionOptions := o.RecommendedOptions.Admission
	o.RecommendedOptions.Admission = nil
	config, err := o.Config()
	if err != nil {
		return err
	}
	noKube := fake.NewClientset()
	noDynamic := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	if err := admissionOptions.ApplyTo(&config.GenericConfig.Config, informers.NewSharedInformerFactory(noKube, 0), noKube,
		noDynamic, o.RecommendedOptions.FeatureGate, config.GenericConfig.EffectiveVersion); err != nil {
		return err
	}
	server, err := config.Complete().New()
	if err != nil {
		return err
	}
	s.ClientConfig = rest.CopyConfig(config.GenericConfig.LoopbackClientConfig)
	s.ClientConfig.QPS, s.ClientConfig.Burst = -1, -1

	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.done <- server.GenericAPIServer.PrepareRun().RunWithContext(ctx) }()
	return s.waitReady()
}

func (s *TestServer) waitReady() error {
	client, err := kubernetes.NewForConfig(s.ClientConfig)
	if err != nil {
		return err
	}
	var lastErr error
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true,
		func(ctx context.Context) (bool, error) {
			select {
			case err := <-s.done:
				return false, fmt.Errorf("server exited before it was ready: %w", err)
			default:
			}
			lastErr = client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
			return lastErr == nil, nil
		})
	if err != nil {
		return fmt.Errorf("waiting for /readyz: %w (last: %v)", err, lastErr)
	}
	return nil
}

// StopEtcd stops the server's etcd, as an outage would, and leaves the server
// running. StartEtcd starts it again.
func (s *TestServer) StopEtcd() {
	if s.etcd != nil {
		s.etcd.Stop()
		s.etcd = nil
	}
}

// StartEtcd starts the server's etcd again after StopEtcd, on its data
// directory and client URL, so the server reconnects and finds every key.
func (s *TestServer) StartEtcd() error {
	if !s.ownEtcd {
		return fmt.Errorf("the server's etcd is run by the caller")
	}
	if s.etcd != nil {
		return fmt.Errorf("etcd is running")
	}
	u, err := url.Parse(s.EtcdURL)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return err
	}
	s.etcd, err = embedetcd.Start(embedetcd.Options{DataDir: filepath.Join(s.dir, "etcd"), ClientPort: port})
	return err
}

// Stop shuts the server down gracefully, then etcd, and removes their files.
func (s *TestServer) Stop() {
	if s.cancel != nil {
		s.cancel()
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
		}
	}
	if s.etcd != nil {
		s.etcd.Stop()
	}
	_ = os.RemoveAll(s.dir)
}
