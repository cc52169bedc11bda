//go:build faults

package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"example.com/database-apiserver/pkg/generated/clientset/versioned"
)

// etcd, a process of its own, SIGKILLed three times while a client creates
// 20 Databases a second through our API server, and started again each time
// on its data directory: every acknowledged create is found afterwards.
func TestEtcdKilledUnderWritesLosesNoAcknowledgedWrite(t *testing.T) {
	etcd := startEtcd(t, 1, 0)[0]
	server := startAPIServer(t, newClientCredentials(t), []string{etcd.ClientURL})
	client, err := versioned.NewForConfig(server.Config)
	require.NoError(t, err)

	w := &writer{clients: []versioned.Interface{client}, ns: "etcd-killed"}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.run(ctx) })
	for i := range 3 {
		w.requireAcked(t, 40, fmt.Sprintf("before kill %d", i+1))
		etcd.kill()
		etcd.start()
		etcd.waitReady()
	}
	w.requireAcked(t, 40, "after the last restart")
	stop()
	wg.Wait()

	acked, found := w.checkNoneLost(t, client)
	t.Logf("measured: etcd SIGKILLed 3 times: %d creates acknowledged, %d found afterwards (%d lost), "+
		"%d failed requests seen by the client and retried (%d answered AlreadyExists on retry), %d given up, max write pause %v",
		acked, found, acked-found, w.errors, w.alreadyExists, w.failed, w.maxPause.Round(time.Millisecond))
	require.Zero(t, w.failed, "creates given up after %v", giveUpAfter)
}
