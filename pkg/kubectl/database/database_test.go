package database

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

const (
	dbPath = "/apis/example.com/v1/namespaces/production/databases/shop"
	// forbiddenRestart is kube-apiserver's RBAC refusal of a restart by a "view" user.
	forbiddenRestart = `databases.example.com "shop" is forbidden: User "viewer" cannot create resource "databases/restart" in API group "example.com" in the namespace "production"`
)

func shopConnection() *examplev1.DatabaseConnection {
	return &examplev1.DatabaseConnection{
		TypeMeta:    metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "DatabaseConnection"},
		ObjectMeta:  metav1.ObjectMeta{Name: "shop", Namespace: "production"},
		Engine:      examplev1.EnginePostgreSQL,
		Host:        "shop.production.svc.cluster.local",
		Port:        5432,
		ReadHost:    "shop-read.production.svc.cluster.local",
		Database:    "app",
		Username:    "postgres",
		SecretName:  "shop-credentials",
		PasswordKey: "password",
		URIKey:      "uri",
		ReadURIKey:  "read-uri",
		Primary:     "shop-0",
		Ready:       true,
	}
}

func shopDatabase() *examplev1.Database {
	created := metav1.NewTime(testNow.Add(-10 * time.Minute))
	return &examplev1.Database{
		TypeMeta:   metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Database"},
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "production", UID: types.UID("0b0b"), Generation: 2, CreationTimestamp: created},
		Spec: examplev1.DatabaseSpec{
			Engine:   examplev1.EnginePostgreSQL,
			Version:  "15.8",
			Replicas: ptr.To[int32](2),
			Storage:  "10Gi",
		},
		Status: examplev1.DatabaseStatus{
			Phase:              examplev1.DatabasePhaseReady,
			ReadyReplicas:      2,
			ObservedGeneration: 2,
			Primary:            "shop-0",
			Conditions: []metav1.Condition{{
				Type: "Ready", Status: metav1.ConditionTrue, Reason: "AllReplicasReady", Message: "2 of 2 replicas are ready",
				LastTransitionTime: metav1.NewTime(testNow.Add(-5 * time.Minute)),
			}},
			Members: []examplev1.DatabaseMember{
				{Name: "shop-0", Role: examplev1.MemberRolePrimary, Ready: true},
				{Name: "shop-1", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](0), LagSeconds: ptr.To[int64](1)},
			},
		},
	}
}

// decodeBody decodes a recorded request body.
func decodeBody(t *testing.T, r fakeRequest, into any) {
	t.Helper()
	assert.Equal(t, "application/json", r.ContentType)
	require.NoError(t, json.Unmarshal(r.Body, into), string(r.Body))
}

func TestConnectionPrintsWhereToConnect(t *testing.T) {
	api := newFakeAPI(t)
	api.on(http.MethodGet, dbPath+"/connection", http.StatusOK, shopConnection())

	code, out, errOut := api.run("connection", "shop", "-n", "production")

	require.Equal(t, 0, code, errOut)
	api.request(http.MethodGet, dbPath+"/connection")
	assert.Equal(t, `Name:       shop
Namespace:  production
Engine:     postgresql
Host:       shop.production.svc.cluster.local
Port:       5432
Read Host:  shop-read.production.svc.cluster.local
Database:   app
Username:   postgres
Password:   key "password" of Secret shop-credentials
URI:        key "uri" of Secret shop-credentials
Read URI:   key "read-uri" of Secret shop-credentials
Primary:    shop-0
Ready:      True

The password (for whoever may read the Secret):
  kubectl get secret shop-credentials -n production -o jsonpath='{.data.password}' | base64 -d
`, out)
}

func TestConnectionOfASingleNotReadyDatabase(t *testing.T) {
	api := newFakeAPI(t)
	conn := shopConnection()
	conn.ReadHost, conn.ReadURIKey, conn.Ready = "", "", false
	api.on(http.MethodGet, dbPath+"/connection", http.StatusOK, conn)

	code, out, errOut := api.run("connection", "shop", "--namespace=production")

	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Read Host:  <none>\n")
	assert.Contains(t, out, "Read URI:   <none>\n")
	assert.Contains(t, out, "Ready:      False (not ready to take connections)\n")
}

func TestConnectionOutputYAMLIsTheDatabaseConnection(t *testing.T) {
	api := newFakeAPI(t)
	conn := shopConnection()
	// Without apiVersion and kind in the answer the printer still names them, from the scheme.
	conn.TypeMeta = metav1.TypeMeta{}
	api.on(http.MethodGet, dbPath+"/connection", http.StatusOK, conn)

	code, out, errOut := api.run("connection", "shop", "-n", "production", "-o", "yaml")

	require.Equal(t, 0, code, errOut)
	var got map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &got), out)
	assert.Equal(t, "example.com/v1", got["apiVersion"])
	assert.Equal(t, "DatabaseConnection", got["kind"])
	assert.Equal(t, "shop.production.svc.cluster.local", got["host"])
	assert.EqualValues(t, 5432, got["port"])
	assert.Equal(t, "shop-credentials", got["secretName"])
	assert.NotContains(t, out, "Password:", "not the human output")
}

func TestConnectionOutputJSON(t *testing.T) {
	api := newFakeAPI(t)
	api.on(http.MethodGet, dbPath+"/connection", http.StatusOK, shopConnection())

	code, out, errOut := api.run("connection", "shop", "-n", "production", "-o", "json")

	require.Equal(t, 0, code, errOut)
	var got examplev1.DatabaseConnection
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	assert.Equal(t, *shopConnection(), got)
}

func TestConnectionUsesTheKubeconfigNamespaceWithoutNamespaceFlag(t *testing.T) {
	api := newFakeAPI(t)
	api.on(http.MethodGet, "/apis/example.com/v1/namespaces/default/databases/shop/connection", http.StatusOK, shopConnection())

	code, _, errOut := api.run("connection", "shop")

	require.Equal(t, 0, code, errOut)
	assert.Equal(t, []string{"GET /apis/example.com/v1/namespaces/default/databases/shop/connection"}, api.paths())
}

func TestConnectionUsesTheNamespaceOfContext(t *testing.T) {
	api := newFakeAPI(t)
	api.on(http.MethodGet, "/apis/example.com/v1/namespaces/team-b/databases/shop/connection", http.StatusOK, shopConnection())

	code, _, errOut := api.run("--context", "team-b", "connection", "shop")

	require.Equal(t, 0, code, errOut)
	assert.Equal(t, []string{"GET /apis/example.com/v1/namespaces/team-b/databases/shop/connection"}, api.paths())
}

func TestConnectionNotFoundIsPrintedAsKubectlDoes(t *testing.T) {
	api := newFakeAPI(t)
	api.on(http.MethodGet, dbPath+"/connection", http.StatusNotFound, databaseNotFound())

	code, out, errOut := api.run("connection", "shop", "-n", "production")

	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Equal(t, "Error from server (NotFound): databases.example.com \"shop\" not found\n", errOut)
}

// databaseNotFound is database-apiserver's answer for the missing Database shop: a
// NotFound whose details name it.
func databaseNotFound() *metav1.Status {
	s := apierrors.NewNotFound(schema.GroupResource{Group: "example.com", Resource: "databases"}, "shop").ErrStatus
	s.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	return &s
}

// Against a server that does not serve example.com/v1 (its 404 names no Database, or is no
// API Status at all), every command says so instead of "the server could not find the
// requested resource"; a missing Database and a missing namespace are still kubectl's
// NotFound.
func TestAServerThatDoesNotServeDatabasesIsSaidSo(t *testing.T) {
	const notServed = "error: the server does not serve databases.example.com (example.com/v1): is database-apiserver installed and its APIService Available? (check with: kubectl get apiservice v1.example.com)\n"
	for _, args := range [][]string{
		{"connection", "shop"}, {"restart", "shop"}, {"switchover", "shop", "--to", "shop-1"}, {"describe", "shop"},
	} {
		api := newFakeAPI(t) // answers every request with kube-apiserver's 404 Status, empty details
		code, out, errOut := api.run(append(args, "-n", "production")...)
		assert.Equal(t, 1, code, args)
		assert.Empty(t, out, args)
		assert.Equal(t, notServed, errOut, args)
	}

	api := newFakeAPI(t)
	api.on(http.MethodGet, dbPath+"/connection", http.StatusNotFound, plainText("404 page not found\n"))
	code, _, errOut := api.run("connection", "shop", "-n", "production")
	assert.Equal(t, 1, code)
	assert.Equal(t, notServed, errOut, "a 404 that is no Status")

	api = newFakeAPI(t)
	noNamespace := status(http.StatusNotFound, metav1.StatusReasonNotFound, `namespaces "nope" not found`)
	noNamespace.Details = &metav1.StatusDetails{Name: "nope", Kind: "namespaces"}
	api.on(http.MethodPost, "/apis/example.com/v1/namespaces/nope/databases/shop/restart", http.StatusNotFound, noNamespace)
	code, _, errOut = api.run("restart", "shop", "-n", "nope")
	assert.Equal(t, 1, code)
	assert.Equal(t, "Error from server (NotFound): namespaces \"nope\" not found\n", errOut)
}

func TestRestartPostsADatabaseRestart(t *testing.T) {
	api := newFakeAPI(t)
	api.on(http.MethodPost, dbPath+"/restart", http.StatusCreated, shopDatabase())

	code, out, errOut := api.run("restart", "shop", "-n", "production", "--reason", "new kernel parameters")

	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "database.example.com/shop restart requested\n", out)
	var body examplev1.DatabaseRestart
	decodeBody(t, api.request(http.MethodPost, dbPath+"/restart"), &body)
	assert.Equal(t, "example.com/v1", body.APIVersion)
	assert.Equal(t, "DatabaseRestart", body.Kind)
	assert.Equal(t, "shop", body.Name)
	assert.Equal(t, "new kernel parameters", body.Reason)
	assert.Equal(t, []string{"POST " + dbPath + "/restart"}, api.paths(), "one request, nothing else")
}

func TestRestartWithoutReasonSendsNone(t *testing.T) {
	api := newFakeAPI(t)
	api.on(http.MethodPost, dbPath+"/restart", http.StatusCreated, shopDatabase())

	code, _, errOut := api.run("restart", "shop", "-n", "production")

	require.Equal(t, 0, code, errOut)
	var body map[string]any
	decodeBody(t, api.request(http.MethodPost, dbPath+"/restart"), &body)
	assert.NotContains(t, body, "reason")
}

func TestRestartOutputYAMLIsTheReturnedDatabase(t *testing.T) {
	api := newFakeAPI(t)
	db := shopDatabase()
	db.Status.Restart = &examplev1.DatabaseRestartStatus{RequestedBy: "alice", RequestedAt: metav1.NewMicroTime(testNow), Reason: "why not"}
	api.on(http.MethodPost, dbPath+"/restart", http.StatusCreated, db)

	code, out, errOut := api.run("restart", "shop", "-n", "production", "-o", "yaml")

	require.Equal(t, 0, code, errOut)
	var got examplev1.Database
	require.NoError(t, yaml.Unmarshal([]byte(out), &got), out)
	assert.Equal(t, "Database", got.Kind)
	assert.Equal(t, "example.com/v1", got.APIVersion)
	require.NotNil(t, got.Status.Restart, out)
	assert.Equal(t, "alice", got.Status.Restart.RequestedBy)
	assert.NotContains(t, out, "restart requested")
}

func TestRestartConflictIsAnErrorFromServer(t *testing.T) {
	api := newFakeAPI(t)
	const msg = `Operation cannot be fulfilled on databases.example.com "shop": a restart asked for by alice is under way`
	api.on(http.MethodPost, dbPath+"/restart", http.StatusConflict, status(http.StatusConflict, metav1.StatusReasonConflict, msg))

	code, out, errOut := api.run("restart", "shop", "-n", "production")

	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Equal(t, "Error from server (Conflict): "+msg+"\n", errOut)
}

func TestRestartForbiddenSaysWhatWasRefused(t *testing.T) {
	api := newFakeAPI(t)
	api.on(http.MethodPost, dbPath+"/restart", http.StatusForbidden, status(http.StatusForbidden, metav1.StatusReasonForbidden, forbiddenRestart))

	code, out, errOut := api.run("restart", "shop", "-n", "production", "--as", "viewer")

	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Equal(t, "Error from server (Forbidden): "+forbiddenRestart+"\n"+
		`error: this needs "create" on "databases/restart" in API group "example.com" in namespace "production" (check with: kubectl auth can-i create databases.example.com --subresource=restart -n production)`+"\n", errOut)
}

func TestSwitchoverPostsADatabaseSwitchover(t *testing.T) {
	api := newFakeAPI(t)
	api.on(http.MethodPost, dbPath+"/switchover", http.StatusCreated, shopDatabase())

	code, out, errOut := api.run("switchover", "shop", "-n", "production", "--to", "shop-1")

	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "database.example.com/shop switchover to shop-1 requested\n", out)
	var body examplev1.DatabaseSwitchover
	decodeBody(t, api.request(http.MethodPost, dbPath+"/switchover"), &body)
	assert.Equal(t, "example.com/v1", body.APIVersion)
	assert.Equal(t, "DatabaseSwitchover", body.Kind)
	assert.Equal(t, "shop", body.Name)
	assert.Equal(t, "shop-1", body.Target)
}

func TestSwitchoverOutputName(t *testing.T) {
	api := newFakeAPI(t)
	api.on(http.MethodPost, dbPath+"/switchover", http.StatusCreated, shopDatabase())

	code, out, errOut := api.run("switchover", "shop", "-n", "production", "--to", "shop-1", "-o", "name")

	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "database.example.com/shop\n", out)
}

func TestSwitchoverWithoutToSendsNothing(t *testing.T) {
	api := newFakeAPI(t)

	code, out, errOut := api.run("switchover", "shop", "-n", "production")

	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Equal(t, "error: --to is required: the Pod to become the primary, e.g. --to shop-1\n", errOut)
	assert.Empty(t, api.paths())
}

func TestSwitchoverToANotCaughtUpReplicaIsRefused(t *testing.T) {
	api := newFakeAPI(t)
	const msg = `DatabaseSwitchover.example.com "shop" is invalid: target: Invalid value: "shop-2": not a replica that streams from the primary`
	api.on(http.MethodPost, dbPath+"/switchover", http.StatusUnprocessableEntity, status(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, msg))

	code, _, errOut := api.run("switchover", "shop", "-n", "production", "--to", "shop-2")

	assert.Equal(t, 1, code)
	assert.Equal(t, "Error from server (Invalid): "+msg+"\n", errOut)
}

func TestCommandsTakeExactlyOneName(t *testing.T) {
	for _, args := range [][]string{{"connection"}, {"restart", "a", "b"}, {"describe"}, {"switchover", "--to", "x-1"}} {
		api := newFakeAPI(t)
		code, _, errOut := api.run(args...)
		assert.Equal(t, 1, code, args)
		assert.True(t, strings.HasPrefix(errOut, "error: "), errOut)
		assert.Contains(t, errOut, "Database name", args)
		assert.Empty(t, api.paths(), args)
	}
}

func TestUnknownOutputFormatIsRefused(t *testing.T) {
	api := newFakeAPI(t)

	code, _, errOut := api.run("connection", "shop", "-o", "wide")

	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `unable to match a printer suitable for the output format "wide"`)
	assert.Empty(t, api.paths())
}

func TestHelpShowsEveryCommandWithExamples(t *testing.T) {
	api := newFakeAPI(t)

	code, out, errOut := api.run("--help")

	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "kubectl database [command]")
	for _, sub := range []string{"connection", "restart", "switchover", "describe", "status"} {
		assert.Contains(t, out, "\n  "+sub+" ", sub)
	}
	assert.Contains(t, out, "kubectl database switchover my-database -n production --to my-database-1")

	for _, sub := range []string{"connection", "restart", "switchover", "describe", "status"} {
		code, out, errOut := api.run(sub, "--help")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "Examples:\n  # ", sub)
		assert.Contains(t, out, "kubectl database "+sub+" my-database -n production", sub)
		assert.Contains(t, out, "--namespace", sub)
	}
	assert.Empty(t, api.paths())
}

func describeFixture(api *fakeAPI) {
	db := shopDatabase()
	db.Spec.NetworkPolicy = &examplev1.DatabaseNetworkPolicy{From: []examplev1.DatabaseNetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}},
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}},
			PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"api"}}}}},
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "reports"}}},
		{PodSelector: &metav1.LabelSelector{}},
		{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "probe"}}},
	}}
	db.Status.Restart = &examplev1.DatabaseRestartStatus{RequestedBy: "alice", RequestedAt: metav1.NewMicroTime(testNow.Add(-2 * time.Minute)), Reason: "new kernel parameters"}
	api.on(http.MethodGet, dbPath, http.StatusOK, db)
	api.on(http.MethodGet, "/apis/apps/v1/namespaces/production/statefulsets/shop", http.StatusOK, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "production"},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)},
		Status:     appsv1.StatefulSetStatus{ReadyReplicas: 2, UpdatedReplicas: 2},
	})
	api.on(http.MethodGet, "/api/v1/namespaces/production/services", http.StatusOK, &corev1.ServiceList{Items: []corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "shop-read"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.0.0.12", Ports: []corev1.ServicePort{{Port: 5432, Protocol: corev1.ProtocolTCP}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.0.0.11", Ports: []corev1.ServicePort{{Port: 5432, Protocol: corev1.ProtocolTCP}}}},
	}})
	api.on(http.MethodGet, "/api/v1/namespaces/production/persistentvolumeclaims", http.StatusOK, &corev1.PersistentVolumeClaimList{Items: []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "data-shop-0"},
		Spec:       corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
	}}})
	api.on(http.MethodGet, "/api/v1/namespaces/production/events", http.StatusOK, &corev1.EventList{Items: []corev1.Event{
		{Type: "Normal", Reason: "Restarting", Message: "Restarting shop-1 (a replica)", Source: corev1.EventSource{Component: "database-controller"},
			LastTimestamp: metav1.NewTime(testNow.Add(-1 * time.Minute)), FirstTimestamp: metav1.NewTime(testNow.Add(-1 * time.Minute)), Count: 1},
		{Type: "Normal", Reason: "Created", Message: "Created StatefulSet shop", Source: corev1.EventSource{Component: "database-controller"},
			LastTimestamp: metav1.NewTime(testNow.Add(-9 * time.Minute)), FirstTimestamp: metav1.NewTime(testNow.Add(-10 * time.Minute)), Count: 3},
	}})
}

// A switchover under way is described from status.switchoverProgress.
func TestDescribeShowsTheSwitchoverUnderWay(t *testing.T) {
	api := newFakeAPI(t)
	describeFixture(api)
	db := shopDatabase()
	db.Status.SwitchoverProgress = &examplev1.DatabaseSwitchoverProgress{From: "shop-0", To: "shop-1", Step: examplev1.SwitchoverStepStoppingPrimary}
	api.on(http.MethodGet, dbPath, http.StatusOK, db)

	code, out, errOut := api.run("describe", "shop", "-n", "production")

	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "\nSwitchover Progress:\n  From:  shop-0\n  To:    shop-1\n  Step:  StoppingPrimary\nConditions:\n")
}

// A failover under way is described from status.failover, with the time the primary last
// took writes.
func TestDescribeShowsTheFailoverUnderWay(t *testing.T) {
	api := newFakeAPI(t)
	describeFixture(api)
	db := shopDatabase()
	db.Spec.Durability = examplev1.DurabilitySynchronous
	db.Status.PrimaryLastWritableTime = &metav1.Time{Time: testNow.Add(-20 * time.Second)}
	db.Status.LastFailoverTime = &metav1.Time{Time: testNow.Add(-time.Hour)}
	db.Spec.Primary = "shop-2"
	db.Status.Failover = &examplev1.DatabaseFailoverStatus{From: "shop-0", To: "shop-1", Phase: examplev1.FailoverPhasePromoting,
		ReachableReplicas: 1, NeededReplicas: 1, StartTime: metav1.NewTime(testNow.Add(-5 * time.Second))}
	api.on(http.MethodGet, dbPath, http.StatusOK, db)

	code, out, errOut := api.run("describe", "shop", "-n", "production")

	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "  Durability:              Synchronous\n")
	assert.Contains(t, out, "  Primary Last Writable:  Wed, 04 Mar 2026 11:59:40 +0000 (20s ago)\n")
	assert.Contains(t, out, "  Last Failover:          Wed, 04 Mar 2026 11:00:00 +0000 (60m ago)\n")
	assert.Contains(t, out, "  Primary:                 shop-2 (asked before the last failover; not acted on)\n")

	// The Pod it names is the primary anyway: nothing to mark.
	db.Spec.Primary = db.Status.Primary
	api.on(http.MethodGet, dbPath, http.StatusOK, db)
	code, out, errOut = api.run("describe", "shop", "-n", "production")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "  Primary:                 "+db.Status.Primary+"\n")
	assert.Contains(t, out, "\nFailover:\n  Phase:               Promoting\n  From:                shop-0\n  To:                  shop-1\n"+
		"  Replicas Answering:  1 (1 needed)\n  Started:             Wed, 04 Mar 2026 11:59:55 +0000 (5s ago)\nConditions:\n")
}

func TestDescribeShowsSpecStatusMembersChildrenAndEvents(t *testing.T) {
	api := newFakeAPI(t)
	describeFixture(api)

	code, out, errOut := api.run("describe", "shop", "-n", "production")

	require.Equal(t, 0, code, errOut)
	assert.Equal(t, `Name:       shop
Namespace:  production
Created:    Wed, 04 Mar 2026 11:50:00 +0000 (10m ago)
Spec:
  Engine:                  postgresql
  Version:                 15.8
  Replicas:                2
  Storage:                 10Gi
  Deletion Policy:         <none>
  Primary:                 <none>
  Network Policy:          pods app=shop; pods tier in (api) in namespaces team=payments; every pod in namespaces team=reports; every pod of its namespace; pods app=probe in every namespace
  Failover:                <none>
  Failover Delay Seconds:  <none>
  Durability:              <none>
Status:
  Phase:                Ready
  Ready Replicas:       2
  Primary:              shop-0
  Observed Generation:  2 (generation 2)
Restart:
  Requested By:  alice
  Requested At:  Wed, 04 Mar 2026 11:58:00 +0000 (2m ago)
  Reason:        new kernel parameters
  Completed At:  <under way>
Conditions:
  Type   Status  Reason            Age  Message
  ----   ------  ------            ---  -------
  Ready  True    AllReplicasReady  5m   2 of 2 replicas are ready
Members:
  Name        Role     Ready  Streaming  Lag
  ----        ----     -----  ---------  ---
  shop-0      Primary  true   -          -
  shop-1      Replica  true   true       0 B, 1 s
StatefulSet:  shop (2 desired, 2 ready, 2 updated)
Services:
  Name       Type       Cluster IP  Ports
  ----       ----       ----------  -----
  shop       ClusterIP  10.0.0.11   5432/TCP
  shop-read  ClusterIP  10.0.0.12   5432/TCP
Secret:      shop-credentials
PersistentVolumeClaims:
  Name         Status  Requested  Capacity
  ----         ------  ---------  --------
  data-shop-0  Bound   10Gi       10Gi
Events:
  Type    Reason      Age               From                 Message
  ----    ------      ---               ----                 -------
  Normal  Created     9m (x3 over 10m)  database-controller  Created StatefulSet shop
  Normal  Restarting  60s               database-controller  Restarting shop-1 (a replica)
`, out)

	assert.Equal(t, "app.kubernetes.io/instance=shop,app.kubernetes.io/managed-by=database-controller,app.kubernetes.io/name=postgresql",
		queryValue(t, api.request(http.MethodGet, "/api/v1/namespaces/production/services"), "labelSelector"))
	assert.Equal(t, "involvedObject.kind=Database,involvedObject.name=shop,involvedObject.namespace=production,involvedObject.uid=0b0b",
		queryValue(t, api.request(http.MethodGet, "/api/v1/namespaces/production/events"), "fieldSelector"))
	for _, p := range api.paths() {
		assert.NotContains(t, p, "secrets", "the Secret is named, never read")
	}
}

// Free text from the server is written with its non-printable characters escaped: a
// reason cannot fake lines, a message cannot send escape sequences or break the columns.
func TestDescribeEscapesNonPrintableText(t *testing.T) {
	api := newFakeAPI(t)
	describeFixture(api)
	db := shopDatabase()
	db.Status.Restart = &examplev1.DatabaseRestartStatus{RequestedBy: "alice", RequestedAt: metav1.NewMicroTime(testNow.Add(-2 * time.Minute)),
		Reason: "kernel\n  Completed At:  Wed, 04 Mar 2026 11:59:00 +0000"}
	db.Status.Conditions[0].Message = "\x1b[2J\x1b[31mall\tgood\u202e"
	api.on(http.MethodGet, dbPath, http.StatusOK, db)
	api.on(http.MethodGet, "/api/v1/namespaces/production/events", http.StatusOK, &corev1.EventList{Items: []corev1.Event{
		{Type: "Normal", Reason: "Restarting", Message: "one\r\nNormal  Created  1s  database-controller  forged", Source: corev1.EventSource{Component: "database-controller"},
			LastTimestamp: metav1.NewTime(testNow.Add(-1 * time.Minute)), Count: 1},
	}})

	code, out, errOut := api.run("describe", "shop", "-n", "production")

	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "  Reason:        kernel\\n  Completed At:  Wed, 04 Mar 2026 11:59:00 +0000\n  Completed At:  <under way>\n")
	assert.Contains(t, out, "  Ready  True    AllReplicasReady  5m   \\x1b[2J\\x1b[31mall\\tgood\\u202e\n")
	assert.Contains(t, out, "  Normal  Restarting  60s  database-controller  one\\r\\nNormal  Created  1s  database-controller  forged\n")
	assert.NotContains(t, out, "\x1b")
	assert.NotContains(t, out, "\r")
	assert.NotContains(t, out, "\t")
	assert.Equal(t, 1, strings.Count(out, "\n  Completed At:"), "one line says Completed At: %s", out)
}

func TestDescribeShowsChildrenItMayNotReadInPlace(t *testing.T) {
	api := newFakeAPI(t)
	describeFixture(api)
	api.on(http.MethodGet, "/api/v1/namespaces/production/events", http.StatusForbidden, status(http.StatusForbidden, metav1.StatusReasonForbidden,
		`events is forbidden: User "app" cannot list resource "events" in API group "" in the namespace "production"`))

	code, out, errOut := api.run("describe", "shop", "-n", "production")

	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Events:        <error: events is forbidden: User \"app\" cannot list resource \"events\"")
	assert.Contains(t, out, "StatefulSet:  shop (2 desired")
}

func TestDescribeOfAMissingDatabaseFails(t *testing.T) {
	api := newFakeAPI(t)
	api.on(http.MethodGet, dbPath, http.StatusNotFound, databaseNotFound())

	code, out, errOut := api.run("describe", "shop", "-n", "production")

	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Equal(t, "Error from server (NotFound): databases.example.com \"shop\" not found\n", errOut)
	assert.Equal(t, []string{"GET " + dbPath}, api.paths())
}

func TestDescribeForbiddenSaysWhatToAskFor(t *testing.T) {
	api := newFakeAPI(t)
	const msg = `databases.example.com "shop" is forbidden: User "nobody" cannot get resource "databases" in API group "example.com" in the namespace "production"`
	api.on(http.MethodGet, dbPath, http.StatusForbidden, status(http.StatusForbidden, metav1.StatusReasonForbidden, msg))

	code, _, errOut := api.run("describe", "shop", "-n", "production")

	assert.Equal(t, 1, code)
	assert.Equal(t, "Error from server (Forbidden): "+msg+"\n"+
		`error: this needs "get" on "databases" in API group "example.com" in namespace "production" (check with: kubectl auth can-i get databases.example.com -n production)`+"\n", errOut)
}

func queryValue(t *testing.T, r fakeRequest, key string) string {
	t.Helper()
	values, err := url.ParseQuery(r.Query)
	require.NoError(t, err)
	return values.Get(key)
}

func TestEscapeText(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "",
		`printable "text" \ 100%`:   `printable "text" \ 100%`,
		"Größe 日本語":                 "Größe 日本語",
		"a\nb\tc\rd\x1be\u009bf":    `a\nb\tc\rd\x1be\u009bf`,
		"bad \xff\xfe utf-8 \u202e": `bad \xff\xfe utf-8 \u202e`,
	} {
		assert.Equal(t, want, escapeText(in), "%q", in)
	}
}

// kubectl database backup posts one DatabaseBackupRequest naming the Database and says so;
// the server's Conflict (a backup running) is printed as kubectl prints it.
func TestBackupPostsADatabaseBackupRequest(t *testing.T) {
	api := newFakeAPI(t)
	api.on(http.MethodPost, dbPath+"/backup", http.StatusCreated, shopDatabase())

	code, out, errOut := api.run("backup", "shop", "-n", "production")

	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "database.example.com/shop backup requested\n", out)
	var body examplev1.DatabaseBackupRequest
	decodeBody(t, api.request(http.MethodPost, dbPath+"/backup"), &body)
	assert.Equal(t, "example.com/v1", body.APIVersion)
	assert.Equal(t, "DatabaseBackupRequest", body.Kind)
	assert.Equal(t, "shop", body.Name)
	assert.Equal(t, []string{"POST " + dbPath + "/backup"}, api.paths(), "one request, nothing else")

	api = newFakeAPI(t)
	api.on(http.MethodPost, dbPath+"/backup", http.StatusConflict, status(http.StatusConflict, metav1.StatusReasonConflict,
		`Operation cannot be fulfilled on databases.example.com "shop": a backup is running: Job shop-backup-1; ask again once it ends (status.backup.activeJob)`))
	code, _, errOut = api.run("backup", "shop", "-n", "production")
	assert.Equal(t, 1, code)
	assert.Equal(t, "Error from server (Conflict): Operation cannot be fulfilled on databases.example.com \"shop\": a backup is running: Job shop-backup-1; ask again once it ends (status.backup.activeJob)\n", errOut)
}
