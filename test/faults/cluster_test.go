//go:build faults

package faults

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"example.com/database-apiserver/pkg/generated/clientset/versioned"
)

// The shape the deploy manifests offer: a 3-member etcd and 2 API servers on
// it. The etcd leader and one API server are SIGKILLed while a client writes
// through both servers, then started again: the retrying client sees no
// create fail and no 403, and every acknowledged create is stored.
func TestOneEtcdMemberAndOneAPIServerKilledUnderLoad(t *testing.T) {
	members := startEtcd(t, 3, 0)
	creds := newClientCredentials(t)
	servers := []*apiServer{startAPIServer(t, creds, clientURLs(members)), startAPIServer(t, creds, clientURLs(members))}
	var clients []versioned.Interface
	for _, s := range servers {
		c, err := versioned.NewForConfig(s.Config)
		require.NoError(t, err)
		clients = append(clients, c)
	}

	w := &writer{clients: clients, ns: "cluster"}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.run(ctx) })
	w.requireAcked(t, 40, "before the faults")
	leader := etcdLeader(t, members)
	leader.kill()
	w.requireAcked(t, 20, "with the etcd leader killed")
	servers[1].kill()
	w.requireAcked(t, 40, "with the etcd leader and an API server killed")
	leader.start()
	leader.waitReady()
	servers[1].start()
	servers[1].waitReady()
	w.requireAcked(t, 40, "after the faults healed")
	stop()
	wg.Wait()

	acked, found := w.checkNoneLost(t, clients[0])
	t.Logf("measured: etcd leader %s and 1 of 2 API servers SIGKILLed: %d creates acknowledged, %d found afterwards (%d lost), "+
		"%d failed requests for the retrying client, %d 403s, %d attempts failed and retried (%d answered AlreadyExists on retry), max write pause %v",
		leader.cfg.Name, acked, found, acked-found, w.failed, w.forbidden, w.errors, w.alreadyExists, w.maxPause.Round(time.Millisecond))
	require.Zero(t, w.failed, "creates the retrying client gave up")
	require.Zero(t, w.forbidden, "403 answers")
}

// etcdLeader returns the member that leads the cluster.
func etcdLeader(t *testing.T, members []*etcdMember) *etcdMember {
	c, err := clientv3.New(clientv3.Config{Endpoints: clientURLs(members), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer c.Close()
	for _, m := range members {
		st, err := c.Status(context.Background(), m.ClientURL)
		require.NoError(t, err)
		if st.Leader == st.Header.MemberId {
			return m
		}
	}
	require.FailNow(t, "no etcd leader")
	return nil
}
