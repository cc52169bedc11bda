package embedetcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"example.com/database-apiserver/internal/embedetcd"
)

func TestDataSurvivesRestartOnTheSameDataDir(t *testing.T) {
	dir := t.TempDir()
	put := func(srv *embedetcd.Server) *clientv3.Client {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL}, DialTimeout: 5 * time.Second})
		require.NoError(t, err)
		return c
	}
	ctx := context.Background()

	srv, err := embedetcd.Start(embedetcd.Options{DataDir: dir})
	require.NoError(t, err)
	c := put(srv)
	_, err = c.Put(ctx, "/registry/example.com/databases/ns/a", "v")
	require.NoError(t, err)
	require.NoError(t, c.Close())
	srv.Stop()

	srv, err = embedetcd.Start(embedetcd.Options{DataDir: dir})
	require.NoError(t, err)
	defer srv.Stop()
	c = put(srv)
	defer c.Close()
	resp, err := c.Get(ctx, "/registry/example.com/databases/ns/a")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, "v", string(resp.Kvs[0].Value))
}
