package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	applyv1 "example.com/database-apiserver/pkg/generated/applyconfiguration/example/v1"
	"example.com/database-apiserver/pkg/generated/clientset/versioned"
	"example.com/database-apiserver/pkg/generated/informers/externalversions"
	"example.com/database-apiserver/test/integration/framework"
)

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

func TestTableOutputHasThePrinterColumns(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	db := newDatabase(ns, "tabled", examplev1.EnginePostgreSQL, "14.5")
	db.Spec.Replicas = ptrInt32(3)
	db.Spec.Storage = "100Gi"
	created := create(t, client, db)
	created.Status.Primary = "tabled-0"
	_, err := client.ExampleV1().Databases(ns).UpdateStatus(context.Background(), created, metav1.UpdateOptions{})
	require.NoError(t, err)

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
	require.Equal(t, []string{"Ready", "Storage", "Primary"}, wide)
	require.Len(t, table.Rows, 1)
	cells := table.Rows[0].Cells
	require.Equal(t, "tabled", cells[0])
	require.Equal(t, "postgresql", cells[1])
	require.Equal(t, "14.5", cells[2])
	require.EqualValues(t, 3, cells[3])
	require.Contains(t, cells, "100Gi")
	require.Equal(t, "tabled-0", cells[len(cells)-1], "Primary is status.primary")

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

// Media types on the wire.
const (
	protobufType = "application/vnd.kubernetes.protobuf"
	jsonType     = "application/json"
)

// exchange is one request a client sent and the media type of the answer.
type exchange struct {
	method, path, contentType, accept, responseType string
}

// wireRecorder keeps every exchange of the clients whose transport it wraps.
type wireRecorder struct {
	mu        sync.Mutex
	exchanges []exchange
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (w *wireRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.exchanges = append(w.exchanges, exchange{
			method:       req.Method,
			path:         req.URL.Path,
			contentType:  req.Header.Get("Content-Type"),
			accept:       req.Header.Get("Accept"),
			responseType: resp.Header.Get("Content-Type"),
		})
		return resp, nil
	})
}

func (w *wireRecorder) all() []exchange {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]exchange(nil), w.exchanges...)
}

// requireAllProtobuf fails unless every answer, and every request body but
// patches (whose media type is the patch type), was protobuf.
func (w *wireRecorder) requireAllProtobuf(t *testing.T) {
	t.Helper()
	exchanges := w.all()
	require.NotEmpty(t, exchanges)
	for _, e := range exchanges {
		require.True(t, strings.HasPrefix(e.responseType, protobufType), "%+v", e)
		if e.method == http.MethodPost || e.method == http.MethodPut {
			require.Equal(t, protobufType, e.contentType, "%+v", e)
		}
	}
}

// configWithContentTypes copies server.ClientConfig with the given
// ContentType and AcceptContentTypes (empty: the clientset's defaults) and a
// transport that records every exchange.
func configWithContentTypes(contentType, accept string) (*rest.Config, *wireRecorder) {
	cfg := rest.CopyConfig(server.ClientConfig)
	cfg.ContentType = contentType
	cfg.AcceptContentTypes = accept
	wire := &wireRecorder{}
	cfg.Wrap(wire.wrap)
	return cfg, wire
}

func clientWithContentTypes(t *testing.T, contentType, accept string) (versioned.Interface, *wireRecorder) {
	t.Helper()
	cfg, wire := configWithContentTypes(contentType, accept)
	client, err := versioned.NewForConfig(cfg)
	require.NoError(t, err)
	return client, wire
}

// Our clientset is generated with --prefers-protobuf: with nothing set in the
// rest.Config it sends and asks for protobuf, JSON second, on every verb and
// on the scale subresource.
func TestClientsetPrefersProtobufByDefault(t *testing.T) {
	client, wire := clientWithContentTypes(t, "", "")
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)

	created := create(t, client, newDatabase(ns, "default", examplev1.EngineMySQL, "8.4"))
	_, err := dbs.Get(ctx, created.Name, metav1.GetOptions{})
	require.NoError(t, err)
	list, err := dbs.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	w, err := dbs.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	w.Stop()
	scale, err := dbs.GetScale(ctx, created.Name, metav1.GetOptions{})
	require.NoError(t, err)
	scale.Spec.Replicas = 2
	_, err = dbs.UpdateScale(ctx, created.Name, scale, metav1.UpdateOptions{})
	require.NoError(t, err)

	wire.requireAllProtobuf(t)
	for _, e := range wire.all() {
		require.Equal(t, protobufType+","+jsonType, e.accept, "%+v", e)
	}
}

// A typed client that sends protobuf and accepts nothing else creates, reads,
// lists, updates (spec, status, scale), applies, patches, watches and deletes
// Databases.
func TestProtobufOnlyClientDoesEveryVerb(t *testing.T) {
	client, wire := clientWithContentTypes(t, protobufType, protobufType)
	ns := namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbs := client.ExampleV1().Databases(ns)

	empty, err := dbs.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, empty.Items)
	w, err := dbs.Watch(ctx, metav1.ListOptions{ResourceVersion: empty.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	next := func(want watch.EventType) *examplev1.Database {
		t.Helper()
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "watch closed")
			require.Equal(t, want, ev.Type, "%v", ev.Object)
			db, ok := ev.Object.(*examplev1.Database)
			require.True(t, ok, "%T", ev.Object)
			return db
		case <-ctx.Done():
			t.Fatalf("no %s event", want)
			return nil
		}
	}

	db := newDatabase(ns, "pb", examplev1.EnginePostgreSQL, "16")
	db.Labels = map[string]string{"tier": "gold"}
	db.Spec.Replicas = ptrInt32(3)
	db.Spec.Storage = "20Gi"
	created, err := dbs.Create(ctx, db, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, examplev1.EnginePostgreSQL, created.Spec.Engine)
	require.Equal(t, int32(3), *created.Spec.Replicas)
	require.Equal(t, "20Gi", created.Spec.Storage)
	require.Equal(t, examplev1.DeletionPolicyDelete, created.Spec.DeletionPolicy, "defaulted by admission")
	require.Equal(t, "gold", created.Labels["tier"])
	require.Equal(t, created.ResourceVersion, next(watch.Added).ResourceVersion)

	got, err := dbs.Get(ctx, "pb", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, created, got)
	list, err := dbs.List(ctx, metav1.ListOptions{LabelSelector: "tier=gold"})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	require.Equal(t, *got, list.Items[0], "list items decode like single objects")

	got.Spec.Storage = "30Gi"
	updated, err := dbs.Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, "30Gi", updated.Spec.Storage)
	require.Equal(t, int64(2), updated.Generation)
	require.Equal(t, "30Gi", next(watch.Modified).Spec.Storage)

	updated.Status = examplev1.DatabaseStatus{
		Phase:              examplev1.DatabasePhaseProvisioning,
		ReadyReplicas:      1,
		ObservedGeneration: updated.Generation,
		Selector:           "app.kubernetes.io/instance=pb",
		Conditions: []metav1.Condition{{
			Type: "Ready", Status: metav1.ConditionFalse, Reason: "Provisioning", Message: "1/3 ready",
			ObservedGeneration: updated.Generation, LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second)),
		}},
	}
	withStatus, err := dbs.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, updated.Status.Conditions[0].LastTransitionTime.Unix(), withStatus.Status.Conditions[0].LastTransitionTime.Unix())
	require.Equal(t, examplev1.DatabasePhaseProvisioning, next(watch.Modified).Status.Phase)

	scale, err := dbs.GetScale(ctx, "pb", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(3), scale.Spec.Replicas)
	require.Equal(t, int32(1), scale.Status.Replicas)
	require.Equal(t, "app.kubernetes.io/instance=pb", scale.Status.Selector)
	scale.Spec.Replicas = 5
	scaled, err := dbs.UpdateScale(ctx, "pb", scale, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(5), scaled.Spec.Replicas)
	require.Equal(t, int32(5), *next(watch.Modified).Spec.Replicas)

	// Patches are JSON or YAML whatever the client's content type; the
	// answers are protobuf.
	applied, err := dbs.Apply(ctx, applyv1.Database("pb", ns).
		WithSpec(applyv1.DatabaseSpec().WithEngine(examplev1.EnginePostgreSQL).WithVersion("16").WithStorage("40Gi")),
		metav1.ApplyOptions{FieldManager: "protobuf-test", Force: true})
	require.NoError(t, err)
	require.Equal(t, "40Gi", applied.Spec.Storage)
	require.Equal(t, int32(5), *applied.Spec.Replicas, "not ours to apply, kept")
	require.Equal(t, "40Gi", next(watch.Modified).Spec.Storage)
	patched, err := dbs.Patch(ctx, "pb", types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"silver"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Equal(t, "silver", patched.Labels["tier"])
	require.Equal(t, "silver", next(watch.Modified).Labels["tier"])

	require.NoError(t, dbs.Delete(ctx, "pb", metav1.DeleteOptions{}))
	require.Equal(t, "pb", next(watch.Deleted).Name)

	wire.requireAllProtobuf(t)
	var sawWatch bool
	for _, e := range wire.all() {
		if e.responseType == protobufType+";stream=watch" {
			sawWatch = true
		}
	}
	require.True(t, sawWatch, "the watch is a protobuf stream: %+v", wire.all())
}

// One Database, written with every field set, reads back the same through
// JSON and protobuf, whichever of the two wrote it; lists and watch events
// agree too.
func TestJSONAndProtobufProduceTheSameObject(t *testing.T) {
	pbClient, pbWire := clientWithContentTypes(t, protobufType, protobufType)
	jsonClient, jsonWire := clientWithContentTypes(t, jsonType, jsonType)
	ns := namespace(t)
	ctx := context.Background()

	full := func(name string) *examplev1.Database {
		db := newDatabase(ns, name, examplev1.EngineMongoDB, "8.0")
		db.Labels = map[string]string{"app": "shop", "tier": "gold"}
		db.Annotations = map[string]string{"example.com/owner": "team-a", "empty": ""}
		db.Finalizers = []string{"example.com/test"}
		db.Spec.Replicas = ptrInt32(3)
		db.Spec.Storage = "100Gi"
		db.Spec.DeletionPolicy = examplev1.DeletionPolicyRetain
		return db
	}
	withStatus := func(client versioned.Interface, db *examplev1.Database) *examplev1.Database {
		db.Status = examplev1.DatabaseStatus{
			Phase:              examplev1.DatabasePhaseDegraded,
			ReadyReplicas:      2,
			ObservedGeneration: db.Generation,
			Selector:           "app.kubernetes.io/instance=" + db.Name + ",app.kubernetes.io/name=mongodb",
			Conditions: []metav1.Condition{
				{Type: "Ready", Status: metav1.ConditionFalse, Reason: "ReplicasNotReady", Message: "2/3 ready: é ✓",
					ObservedGeneration: db.Generation, LastTransitionTime: metav1.NewTime(time.Unix(1700000000, 0))},
				{Type: "Degraded", Status: metav1.ConditionTrue, Reason: "ReplicaLost",
					ObservedGeneration: db.Generation, LastTransitionTime: metav1.NewTime(time.Unix(1700000100, 0))},
			},
		}
		out, err := client.ExampleV1().Databases(ns).UpdateStatus(ctx, db, metav1.UpdateOptions{})
		require.NoError(t, err)
		return out
	}
	requireSame := func(want, got any) {
		t.Helper()
		require.True(t, apiequality.Semantic.DeepEqual(want, got), "JSON and protobuf differ:\n%s", diff.Diff(want, got))
	}
	clients := map[string]versioned.Interface{"protobuf": pbClient, "json": jsonClient}

	for writer, client := range clients {
		t.Run("written as "+writer, func(t *testing.T) {
			name := "by-" + writer
			written := withStatus(client, create(t, client, full(name)))
			t.Cleanup(func() {
				written.Finalizers = nil
				_, _ = jsonClient.ExampleV1().Databases(ns).Update(ctx, written, metav1.UpdateOptions{})
			})
			for reader, c := range clients {
				got, err := c.ExampleV1().Databases(ns).Get(ctx, name, metav1.GetOptions{})
				require.NoError(t, err, reader)
				requireSame(written, got)
			}
			pbList, err := pbClient.ExampleV1().Databases(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
			require.NoError(t, err)
			jsonList, err := jsonClient.ExampleV1().Databases(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
			require.NoError(t, err)
			require.Len(t, pbList.Items, 1)
			requireSame(jsonList.Items, pbList.Items)
			requireSame(written, &pbList.Items[0])

			var events []*examplev1.Database
			for _, c := range []versioned.Interface{pbClient, jsonClient} {
				w, err := c.ExampleV1().Databases(ns).Watch(ctx, metav1.ListOptions{
					FieldSelector: "metadata.name=" + name, ResourceVersion: "0"})
				require.NoError(t, err)
				select {
				case ev := <-w.ResultChan():
					require.Equal(t, watch.Added, ev.Type)
					events = append(events, ev.Object.(*examplev1.Database))
				case <-time.After(30 * time.Second):
					t.Fatal("no initial event")
				}
				w.Stop()
			}
			requireSame(events[1], events[0])
			requireSame(written, events[0])
		})
	}

	pbWire.requireAllProtobuf(t)
	for _, e := range jsonWire.all() {
		require.True(t, strings.HasPrefix(e.responseType, jsonType), "%+v", e)
	}
}

// On the wire, a protobuf list is the runtime.Unknown envelope with the
// list's apiVersion and kind, and its items carry no apiVersion and kind (as
// with in-tree types: protobuf drops TypeMeta from embedded objects). The
// clientset does not need them.
func TestProtobufListItemsCarryNoTypeMeta(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	create(t, client, newDatabase(ns, "a", examplev1.EngineMySQL, "8.4"))
	create(t, client, newDatabase(ns, "b", examplev1.EnginePostgreSQL, "16"))

	resp := do(t, http.MethodGet, databasesPath(ns), nil, map[string]string{"Accept": protobufType})
	require.Equal(t, http.StatusOK, resp.code, "%s", resp.body)
	require.Equal(t, protobufType, resp.header.Get("Content-Type"))
	magic := []byte{0x6b, 0x38, 0x73, 0x00} // "k8s\x00"
	require.True(t, bytes.HasPrefix(resp.body, magic), "%q", resp.body)

	var envelope runtime.Unknown
	require.NoError(t, envelope.Unmarshal(resp.body[len(magic):]))
	require.Equal(t, runtime.TypeMeta{APIVersion: "example.com/v1", Kind: "DatabaseList"}, envelope.TypeMeta)
	var list examplev1.DatabaseList
	require.NoError(t, list.Unmarshal(envelope.Raw))
	require.NotEmpty(t, list.ResourceVersion)
	require.Len(t, list.Items, 2)
	for _, item := range list.Items {
		require.Empty(t, item.APIVersion)
		require.Empty(t, item.Kind)
	}
	require.ElementsMatch(t, []string{"a", "b"}, []string{list.Items[0].Name, list.Items[1].Name})
	require.Equal(t, examplev1.EngineMySQL, list.Items[0].Spec.Engine)
}

// A protobuf body that does not decode is the client's fault (400), not a
// server error and no longer an unsupported media type (415).
func TestBadProtobufBodiesAreBadRequests(t *testing.T) {
	ns := namespace(t)
	headers := map[string]string{"Content-Type": protobufType}

	resp := do(t, http.MethodPost, databasesPath(ns), []byte{0x6b, 0x38, 0x73, 0x00, 0xff, 0xff}, headers)
	require.Equal(t, http.StatusBadRequest, resp.code, "%s", resp.body)

	resp = do(t, http.MethodPost, databasesPath(ns), []byte("not protobuf"), headers)
	require.Equal(t, http.StatusBadRequest, resp.code, "%s", resp.body)
}

// The namespace controller lists and deletes every namespaced resource with a
// metadata client that prefers protobuf, and the garbage collector watches
// them with one; that must work for databases.
func TestMetadataClientPreferringProtobufCanListWatchAndDeleteCollection(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	create(t, client, newDatabase(ns, "a", examplev1.EngineMySQL, "8.4"))
	create(t, client, newDatabase(ns, "b", examplev1.EngineMySQL, "8.4"))

	cfg, wire := configWithContentTypes(protobufType, protobufType+","+jsonType)
	meta, err := metadata.NewForConfig(cfg)
	require.NoError(t, err)
	databases := meta.Resource(examplev1.SchemeGroupVersion.WithResource("databases")).Namespace(ns)

	list, err := databases.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 2)
	w, err := databases.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	require.NoError(t, databases.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	var deleted []string
	for len(deleted) < 2 {
		select {
		case ev := <-w.ResultChan():
			require.Equal(t, watch.Deleted, ev.Type, "%v", ev.Object)
			deleted = append(deleted, ev.Object.(*metav1.PartialObjectMetadata).Name)
		case <-time.After(30 * time.Second):
			t.Fatalf("deleted only %v", deleted)
		}
	}
	require.ElementsMatch(t, []string{"a", "b"}, deleted)
	list, err = databases.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items)
	// Lists, watch and the deletion's Status all came back as protobuf.
	wire.requireAllProtobuf(t)
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
	require.Contains(t, string(spec.Properties["primary"]), "planned switchover")
	status, ok := doc.Components.Schemas["com.example.v1.DatabaseStatus"]
	require.True(t, ok)
	require.Contains(t, string(status.Properties["members"]), `"x-kubernetes-list-type":"map"`)
	require.Contains(t, string(status.Properties["members"]), `"x-kubernetes-list-map-keys":["name"]`)
	member, ok := doc.Components.Schemas["com.example.v1.DatabaseMember"]
	require.True(t, ok)
	require.Contains(t, string(member.Properties["role"]), `"Primary"`)
	require.Contains(t, string(member.Properties["role"]), `"Replica"`)

	v2 := do(t, http.MethodGet, "/openapi/v2", nil, map[string]string{"Accept": "application/json"})
	require.Equal(t, http.StatusOK, v2.code)
	require.Contains(t, string(v2.body), `"group":"example.com","kind":"Database","version":"v1"`)
}

func TestHealthAndMetricsEndpoints(t *testing.T) {
	// storage-readiness: ready only once the watch cache of databases is initialised.
	for _, path := range []string{"/livez", "/readyz", "/healthz", "/readyz/etcd", "/readyz/poststarthook/storage-readiness"} {
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
	// Protobuf, the default --storage-media-type: "k8s\x00", then a runtime.Unknown envelope.
	value := resp.Kvs[0].Value
	require.True(t, bytes.HasPrefix(value, []byte("k8s\x00")), "%q", value)
	var envelope runtime.Unknown
	require.NoError(t, envelope.Unmarshal(value[4:]))
	require.Equal(t, runtime.TypeMeta{APIVersion: "example.com/v1", Kind: "Database"}, envelope.TypeMeta)
}

// With --storage-media-type=application/json Databases are stored in etcd as
// JSON (protobuf is the default, above), and read, listed and watched as usual.
func TestStorageMediaTypeJSONStoresJSON(t *testing.T) {
	jsonServer, err := framework.Start("--storage-media-type=" + jsonType)
	require.NoError(t, err)
	defer jsonServer.Stop()
	client, err := versioned.NewForConfig(jsonServer.ClientConfig)
	require.NoError(t, err)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases("stored")

	created, err := dbs.Create(ctx, newDatabase("stored", "js", examplev1.EnginePostgreSQL, "16"), metav1.CreateOptions{})
	require.NoError(t, err)
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{jsonServer.EtcdURL}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer etcd.Close()
	resp, err := etcd.Get(ctx, "/registry/example.com/databases/stored/js")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.True(t, bytes.HasPrefix(resp.Kvs[0].Value, []byte(`{"kind":"Database","apiVersion":"example.com/v1"`)), "%s", resp.Kvs[0].Value)

	got, err := dbs.Get(ctx, "js", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, created, got)
	list, err := dbs.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	w, err := dbs.Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	require.NoError(t, err)
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		require.Equal(t, watch.Added, ev.Type)
		require.Equal(t, created.Spec, ev.Object.(*examplev1.Database).Spec)
	case <-time.After(30 * time.Second):
		t.Fatal("no event")
	}
}
