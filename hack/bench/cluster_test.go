package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	rpctypes "go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"example.com/database-apiserver/internal/embedetcd"
)

// compactEtcd compacts to the current revision and records it where the API servers'
// compactors look (compact_rev_key), whether or not a compactor wrote that key before.
func TestCompactEtcdCompactsAndRecordsTheRevision(t *testing.T) {
	srv, err := embedetcd.Start(embedetcd.Options{DataDir: t.TempDir()})
	require.NoError(t, err)
	defer srv.Stop()
	ctx := context.Background()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer c.Close()

	for round := range 2 {
		first, err := c.Put(ctx, "/registry/example.com/databases/ns/a", "1")
		require.NoError(t, err)
		_, err = c.Put(ctx, "/registry/example.com/databases/ns/a", "2")
		require.NoError(t, err)

		rev, err := compactEtcd(ctx, srv.ClientURL)
		require.NoError(t, err, "round %d", round)
		require.Greater(t, rev, first.Header.Revision)

		_, err = c.Get(ctx, "/registry/example.com/databases/ns/a", clientv3.WithRev(first.Header.Revision))
		require.ErrorIs(t, err, rpctypes.ErrCompacted, "round %d: the first put's revision is still readable", round)
		key, err := c.Get(ctx, "compact_rev_key")
		require.NoError(t, err)
		require.Len(t, key.Kvs, 1)
		require.Equal(t, strconv.FormatInt(rev, 10), string(key.Kvs[0].Value))
	}
}
