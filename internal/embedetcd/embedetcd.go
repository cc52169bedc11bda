// Package embedetcd runs a real single-member etcd server inside the current
// process, listening on loopback only. Integration tests and the local control
// plane use it instead of an etcd binary.
package embedetcd

import (
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Server is a running embedded etcd.
type Server struct {
	etcd *embed.Etcd
	// logLevel is etcd's log level: errors while it runs, nothing once Stop closes it.
	logLevel zap.AtomicLevel
	// ClientURL is the http:// URL clients dial, e.g. "http://127.0.0.1:41234".
	ClientURL string
}

// Options says where etcd keeps its data and where it listens.
type Options struct {
	// DataDir holds the member's data; reusing it keeps every key across restarts.
	DataDir string
	// ClientPort and PeerPort are loopback ports; 0 picks a free one.
	ClientPort, PeerPort int
	// StartTimeout bounds how long Start waits for the member to be ready; 0 means one minute.
	StartTimeout time.Duration
	// Name is the member's name; empty means "default".
	Name string
	// InitialCluster lists the members of a new cluster as name=peerURL pairs separated by
	// commas ("a=http://127.0.0.1:2380,b=http://127.0.0.1:2381"), this one included; empty
	// means a cluster of this member alone. A member restarted on its data directory reads
	// its cluster from there and ignores it.
	InitialCluster string
	// QuotaBackendBytes is the size of the backend at which etcd raises its NOSPACE alarm
	// and refuses writes; 0 means etcd's default (2 GiB).
	QuotaBackendBytes int64
}

// Start starts etcd and waits until it serves clients. It returns an error if
// the ports are taken, the data directory is unusable or etcd is not ready
// within the timeout.
func Start(opts Options) (*Server, error) {
	cfg := embed.NewConfig()
	cfg.Name = "default"
	if opts.Name != "" {
		cfg.Name = opts.Name
	}
	cfg.Dir = opts.DataDir
	// etcd's own logs, errors only, as JSON on stderr, at a level Stop can lower.
	logLevel := zap.NewAtomicLevelAt(zapcore.ErrorLevel)
	logConfig := zap.NewProductionConfig()
	logConfig.Level = logLevel
	logConfig.Sampling = nil
	logger, err := logConfig.Build()
	if err != nil {
		return nil, fmt.Errorf("etcd logger: %w", err)
	}
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)
	clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", opts.ClientPort)}
	peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", opts.PeerPort)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if opts.InitialCluster != "" {
		cfg.InitialCluster = opts.InitialCluster
	}
	cfg.QuotaBackendBytes = opts.QuotaBackendBytes
	// Compact history the way kube-apiserver expects a dedicated etcd to.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "1h"

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting embedded etcd in %s: %w", opts.DataDir, err)
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = time.Minute
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed: %w", err)
	case <-time.After(timeout):
		e.Close()
		return nil, fmt.Errorf("embedded etcd not ready after %s", timeout)
	}
	return &Server{etcd: e, logLevel: logLevel, ClientURL: "http://" + e.Clients[0].Addr().String()}, nil
}

// Stop stops etcd and waits for it to release its data directory. Its logs are silenced
// first: closing its listeners makes every serve loop log its exit as an error ("use of
// closed network connection"), which on a clean stop is noise.
func (s *Server) Stop() {
	s.logLevel.SetLevel(zapcore.FatalLevel)
	s.etcd.Close()
}
