package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/generated/informers/externalversions"
)

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

func TestTableOutputHasTheSeedColumns(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	db := newDatabase(ns, "tabled", examplev1.EnginePostgreSQL, "14.5")
	db.Spec.Replicas = ptrInt32(3)
	db.Spec.Storage = "100Gi"
	create(t, client, db)

	resp := do(t, http.MethodGet, databasesPath(ns), nil, map[string]string{"Accept": tableAccept})
	require.Equal(t, http.StatusOK, resp.code, "%s", resp.body)
	var table metav1.Table
	require.NoError(t, json.Unmarshal(resp.body, &table))

	var names, wide []string
	for _, col := range table.ColumnDefinitions {
		if col.Priority == 0 {
			names = append(names, col.Name)
		} else {
			wide = append(wide, col.Name)
		}
	}
	require.Equal(t, []string{"Name", "Engine", "Version", "Replicas", "Status", "Age"}, names)
	require.Subset(t, wide, []string{"Ready", "Storage"})
	require.Len(t, table.Rows, 1)
	cells := table.Rows[0].Cells
	require.Equal(t, "tabled", cells[0])
	require.Equal(t, "postgresql", cells[1])
	require.Equal(t, "14.5", cells[2])
	require.EqualValues(t, 3, cells[3])
	require.Contains(t, cells, "100Gi")

	one := do(t, http.MethodGet, databasesPath(ns)+"/tabled", nil, map[string]string{"Accept": tableAccept})
	require.Equal(t, http.StatusOK, one.code)
	require.Contains(t, string(one.body), `"kind":"Table"`)
}

func TestFieldSelectorsFilterByEngineVersionAndPhase(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	create(t, client, newDatabase(ns, "my", examplev1.EngineMySQL, "8.4"))
	create(t, client, newDatabase(ns, "pg", examplev1.EnginePostgreSQL, "17"))
	create(t, client, newDatabase(ns, "mongo", examplev1.EngineMongoDB, "8.0"))
	dbs := client.ExampleV1().Databases(ns)

	names := func(selector string) []string {
		list, err := dbs.List(ctx, metav1.ListOptions{FieldSelector: selector})
		require.NoError(t, err, selector)
		var out []string
		for _, item := range list.Items {
			out = append(out, item.Name)
		}
		return out
	}
	require.Equal(t, []string{"my"}, names("spec.engine=mysql"))
	require.ElementsMatch(t, []string{"pg", "mongo"}, names("spec.engine!=mysql"))
	require.Equal(t, []string{"pg"}, names("spec.version=17"))
	require.ElementsMatch(t, []string{"my", "pg", "mongo"}, names("status.phase="))

	_, err := dbs.List(ctx, metav1.ListOptions{FieldSelector: "spec.storage=10Gi"})
	require.Error(t, err)
	require.ErrorContains(t, err, "field label not supported: spec.storage")
}

func TestInformerSyncsAndSeesLaterEvents(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	create(t, client, newDatabase(ns, "before", examplev1.EngineMySQL, "8.4"))

	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace(ns))
	informer := factory.Example().V1().Databases()
	events := make(chan string, 16)
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { events <- "add " + obj.(*examplev1.Database).Name },
		UpdateFunc: func(_, obj any) { events <- "update " + obj.(*examplev1.Database).Name },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			events <- "delete " + obj.(*examplev1.Database).Name
		},
	})
	require.NoError(t, err)
	factory.Start(ctx.Done())
	for typ, synced := range factory.WaitForCacheSync(ctx.Done()) {
		require.True(t, synced, "%v did not sync", typ)
	}
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-events:
			require.Equal(t, want, got)
		case <-time.After(30 * time.Second):
			t.Fatalf("no %q event", want)
		}
	}
	expect("add before")

	db := create(t, client, newDatabase(ns, "after", examplev1.EngineMySQL, "8.4"))
	expect("add after")
	db.Spec.Replicas = ptrInt32(2)
	_, err = client.ExampleV1().Databases(ns).Update(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	expect("update after")
	require.NoError(t, client.ExampleV1().Databases(ns).Delete(ctx, "after", metav1.DeleteOptions{}))
	expect("delete after")

	cached, err := informer.Lister().Databases(ns).Get("before")
	require.NoError(t, err)
	require.Equal(t, "before", cached.Name)
}

func TestProtobufIsRefusedCleanlySoClientsFallBackToJSON(t *testing.T) {
	ns := namespace(t)
	const protobuf = "application/vnd.kubernetes.protobuf"

	resp := do(t, http.MethodGet, databasesPath(ns), nil, map[string]string{"Accept": protobuf + ", application/json"})
	require.Equal(t, http.StatusOK, resp.code, "%s", resp.body)
	require.True(t, strings.HasPrefix(resp.header.Get("Content-Type"), "application/json"))

	resp = do(t, http.MethodGet, databasesPath(ns), nil, map[string]string{"Accept": protobuf})
	require.Equal(t, http.StatusNotAcceptable, resp.code, "%s", resp.body)

	resp = do(t, http.MethodPost, databasesPath(ns), []byte{0x6b, 0x38, 0x73, 0x00}, map[string]string{"Content-Type": protobuf})
	require.Equal(t, http.StatusUnsupportedMediaType, resp.code, "%s", resp.body)
}

// The namespace controller lists and deletes every namespaced resource with a
// metadata client that prefers protobuf; that must work for databases.
func TestMetadataClientPreferringProtobufCanListAndDeleteCollection(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	create(t, client, newDatabase(ns, "a", examplev1.EngineMySQL, "8.4"))
	create(t, client, newDatabase(ns, "b", examplev1.EngineMySQL, "8.4"))

	cfg := rest.CopyConfig(server.ClientConfig)
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	meta, err := metadata.NewForConfig(cfg)
	require.NoError(t, err)
	databases := meta.Resource(examplev1.SchemeGroupVersion.WithResource("databases")).Namespace(ns)

	list, err := databases.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 2)
	require.NoError(t, databases.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	list, err = databases.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items)
}

func TestDiscoveryListsDatabasesWithShortNameAndSubresources(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(server.ClientConfig)
	require.NoError(t, err)
	resources, err := dc.ServerResourcesForGroupVersion("example.com/v1")
	require.NoError(t, err)

	byName := map[string]metav1.APIResource{}
	for _, r := range resources.APIResources {
		byName[r.Name] = r
	}
	require.Contains(t, byName, "databases/status")
	require.Contains(t, byName, "databases/scale")
	databases := byName["databases"]
	require.True(t, databases.Namespaced)
	require.Equal(t, "Database", databases.Kind)
	require.Equal(t, "database", databases.SingularName)
	require.Equal(t, []string{"db"}, databases.ShortNames)
	require.Subset(t, []string(databases.Verbs), []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"})
	scale := byName["databases/scale"]
	require.Equal(t, "autoscaling", scale.Group)
	require.Equal(t, "Scale", scale.Kind)
}

func TestOpenAPIDescribesTheDatabaseSchema(t *testing.T) {
	v3 := do(t, http.MethodGet, "/openapi/v3/apis/example.com/v1", nil, nil)
	require.Equal(t, http.StatusOK, v3.code)
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(v3.body, &doc))
	spec, ok := doc.Components.Schemas["com.example.v1.DatabaseSpec"]
	require.True(t, ok, "schemas: %v", sets.List(sets.KeySet(doc.Components.Schemas)))
	require.Contains(t, string(spec.Properties["engine"]), `"postgresql"`)
	require.Contains(t, string(spec.Properties["replicas"]), `"maximum":10`)
	require.Contains(t, string(spec.Properties["storage"]), `^[0-9]+Gi$`)

	v2 := do(t, http.MethodGet, "/openapi/v2", nil, map[string]string{"Accept": "application/json"})
	require.Equal(t, http.StatusOK, v2.code)
	require.Contains(t, string(v2.body), `"group":"example.com","kind":"Database","version":"v1"`)
}

func TestHealthAndMetricsEndpoints(t *testing.T) {
	for _, path := range []string{"/livez", "/readyz", "/healthz", "/readyz/etcd"} {
		resp := do(t, http.MethodGet, path, nil, nil)
		require.Equal(t, http.StatusOK, resp.code, "%s: %s", path, resp.body)
	}
	resp := do(t, http.MethodGet, "/metrics", nil, nil)
	require.Equal(t, http.StatusOK, resp.code)
	require.Contains(t, string(resp.body), `apiserver_request_total{`)
	require.Contains(t, string(resp.body), `resource="databases"`)
}

func TestDatabasesAreStoredUnderTheirOwnEtcdPrefix(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	create(t, client, newDatabase(ns, "stored", examplev1.EngineMySQL, "8.4"))

	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{server.EtcdURL}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer etcd.Close()
	resp, err := etcd.Get(context.Background(), "/registry/example.com/databases/"+ns+"/stored")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Contains(t, string(resp.Kvs[0].Value), `"apiVersion":"example.com/v1"`)
}
