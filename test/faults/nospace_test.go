//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/generated/clientset/versioned"
)

// etcd out of space: once its NOSPACE alarm is raised, a create through our
// server is a 503 that says the store is out of space, without Retry-After;
// reads still work; after the recovery etcd documents (compact, defragment,
// disarm the alarm) the same server writes again.
func TestEtcdOutOfSpaceIsAClearErrorAndRecovers(t *testing.T) {
	const quota = 16 << 20
	etcd := startEtcd(t, 1, quota)[0]
	server := startAPIServer(t, newClientCredentials(t), []string{etcd.ClientURL})
	client, err := versioned.NewForConfig(server.Config)
	require.NoError(t, err)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases("nospace")
	newDatabase := func(name string) *examplev1.Database {
		return &examplev1.Database{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: examplev1.DatabaseSpec{Engine: examplev1.EngineMySQL, Version: "8.4", Replicas: ptr.To[int32](1), Storage: "1Gi"}}
	}
	_, err = dbs.Create(ctx, newDatabase("before"), metav1.CreateOptions{})
	require.NoError(t, err)

	// Fill etcd with the history of one key until it refuses writes.
	kv, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer kv.Close()
	filler := strings.Repeat("x", 512<<10)
	puts := 0
	for ; ; puts++ {
		_, err := kv.Put(ctx, "/faults/filler", filler)
		if errors.Is(err, rpctypes.ErrNoSpace) {
			break
		}
		require.NoError(t, err)
		require.Less(t, puts, 200, "no NOSPACE alarm after %d puts of 512 KiB", puts)
	}
	alarms, err := kv.AlarmList(ctx)
	require.NoError(t, err)
	require.Len(t, alarms.Alarms, 1)
	require.Equal(t, etcdserverpb.AlarmType_NOSPACE, alarms.Alarms[0].Alarm)

	// One attempt, raw HTTP: the answer itself is what is tested.
	httpClient, err := rest.HTTPClientFor(server.Config)
	require.NoError(t, err)
	body := `{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"during"},"spec":{"engine":"mysql","version":"8.4"}}`
	resp, err := httpClient.Post(server.Config.Host+"/apis/example.com/v1/namespaces/nospace/databases", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	t.Logf("measured: etcd out of space after %d puts of 512 KiB (quota %d MiB): create answered %d, Retry-After %q: %s",
		puts, quota>>20, resp.StatusCode, resp.Header.Get("Retry-After"), data)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", data)
	require.Empty(t, resp.Header.Get("Retry-After"), "a retry fails until an operator frees space")
	var status metav1.Status
	require.NoError(t, json.Unmarshal(data, &status), "%s", data)
	require.Equal(t, metav1.StatusReasonServiceUnavailable, status.Reason)
	require.Contains(t, status.Message, "the storage of databases.example.com is out of space and refuses writes")

	got, err := dbs.Get(ctx, "before", metav1.GetOptions{})
	require.NoError(t, err, "reads work while etcd is out of space")
	require.Equal(t, "before", got.Name)
	list, err := dbs.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)

	// etcd's recovery from NOSPACE: compact the history, defragment, disarm.
	status0, err := kv.Status(ctx, etcd.ClientURL)
	require.NoError(t, err)
	_, err = kv.Compact(ctx, status0.Header.Revision, clientv3.WithCompactPhysical())
	require.NoError(t, err)
	_, err = kv.Defragment(ctx, etcd.ClientURL)
	require.NoError(t, err)
	status1, err := kv.Status(ctx, etcd.ClientURL)
	require.NoError(t, err)
	_, err = kv.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: alarms.Alarms[0].MemberID, Alarm: etcdserverpb.AlarmType_NOSPACE})
	require.NoError(t, err)
	t.Logf("measured: etcd backend %d KiB before compaction and defragmentation, %d KiB after",
		status0.DbSize>>10, status1.DbSize>>10)

	_, err = dbs.Create(ctx, newDatabase("after"), metav1.CreateOptions{})
	require.NoError(t, err, "writes work again after the recovery")
	list, err = dbs.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 2)
}
