package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/generated/clientset/versioned"
	typedexamplev1 "example.com/database-apiserver/pkg/generated/clientset/versioned/typed/example/v1"
)

// A Database's connection is computed from it on read: the client and read
// hosts, port, database, user, Secret and keys, and primary and readiness
// from status; no password is served.
func TestConnectionIsComputedFromTheDatabaseAndItsStatus(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "shop", examplev1.EnginePostgreSQL, "16")
	db.Spec.Replicas = ptrInt32(3)
	db = create(t, client, db)

	conn, err := dbs.GetConnection(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "shop", conn.Name)
	require.Equal(t, ns, conn.Namespace)
	require.Equal(t, examplev1.EnginePostgreSQL, conn.Engine)
	require.Equal(t, "shop."+ns+".svc.cluster.local", conn.Host)
	require.Equal(t, int32(5432), conn.Port)
	require.Equal(t, "shop-read."+ns+".svc.cluster.local", conn.ReadHost)
	require.Equal(t, "shop", conn.Database)
	require.Equal(t, "app", conn.Username)
	require.Equal(t, "shop-credentials", conn.SecretName)
	require.Equal(t, "password", conn.PasswordKey)
	require.Equal(t, "uri", conn.URIKey)
	require.Equal(t, "read-uri", conn.ReadURIKey)
	require.Empty(t, conn.Primary)
	require.False(t, conn.Ready)

	db.Status.Primary = "shop-0"
	db.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AllReplicasReady", LastTransitionTime: metav1.Now()}}
	_, err = dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)

	resp := do(t, http.MethodGet, databasesPath(ns)+"/shop/connection", nil, nil)
	require.Equal(t, http.StatusOK, resp.code, "%s", resp.body)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(resp.body, &raw))
	require.Equal(t, "DatabaseConnection", raw["kind"])
	require.Equal(t, "example.com/v1", raw["apiVersion"])
	require.Equal(t, true, raw["ready"])
	require.Equal(t, "shop-0", raw["primary"])
	for _, k := range []string{"password", "uri", "readURI"} {
		require.NotContains(t, raw, k, "no credentials are served")
	}

	// A MongoDB replica set has a read host too; a single-member one has none.
	my := newDatabase(ns, "docs", examplev1.EngineMongoDB, "7.0")
	my.Spec.Replicas = ptrInt32(3)
	create(t, client, my)
	conn, err = dbs.GetConnection(ctx, "docs", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(27017), conn.Port)
	require.Equal(t, "app", conn.Username, "MongoDB's application user, not its root user")
	require.Equal(t, "docs", conn.Database, "the database the application user belongs to")
	require.Equal(t, "docs-read."+ns+".svc.cluster.local", conn.ReadHost)
	require.Equal(t, "read-uri", conn.ReadURIKey)
	create(t, client, newDatabase(ns, "single", examplev1.EngineMongoDB, "7.0"))
	conn, err = dbs.GetConnection(ctx, "single", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, conn.ReadHost)
	require.Empty(t, conn.ReadURIKey)

	_, err = dbs.GetConnection(ctx, "missing", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "got %v", err)
}

// A restart is recorded in status.restart with the requesting user and the
// time; a second one while it is under way is a 409 naming the first; once
// the controller completes it, another may be asked for.
func TestRestartIsRecordedAndASecondWhileUnderWayIsConflict(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	created := create(t, client, newDatabase(ns, "shop", examplev1.EnginePostgreSQL, "16"))

	before := time.Now().Add(-time.Second)
	got, err := dbs.Restart(ctx, "shop", &examplev1.DatabaseRestart{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Reason: "new kernel"}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotNil(t, got.Status.Restart)
	require.Equal(t, user.APIServerUser, got.Status.Restart.RequestedBy)
	require.Equal(t, "new kernel", got.Status.Restart.Reason)
	require.True(t, got.Status.Restart.RequestedAt.After(before))
	require.Nil(t, got.Status.Restart.CompletedAt)
	require.Equal(t, created.Generation, got.Generation, "a restart is no spec change")
	require.Equal(t, created.Spec, got.Spec)

	_, err = dbs.Restart(ctx, "shop", &examplev1.DatabaseRestart{}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	require.ErrorContains(t, err, `Operation cannot be fulfilled on databases.example.com "shop": a restart is under way: requested by `+user.APIServerUser)

	stored, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, got.Status.Restart, stored.Status.Restart, "the refusal changed nothing")
	require.Equal(t, got.ResourceVersion, stored.ResourceVersion)

	// The controller completes it through status; then a new one is accepted.
	done := metav1.NowMicro()
	stored.Status.Restart.CompletedAt = &done
	stored, err = dbs.UpdateStatus(ctx, stored, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NotNil(t, stored.Status.Restart.CompletedAt)

	again, err := dbs.Restart(ctx, "shop", &examplev1.DatabaseRestart{}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Nil(t, again.Status.Restart.CompletedAt)
	require.True(t, again.Status.Restart.RequestedAt.After(got.Status.Restart.RequestedAt.Time))
	require.Empty(t, again.Status.Restart.Reason)

	// A dry run is checked and answered but stores nothing.
	stored.Status.Restart = again.Status.Restart.DeepCopy()
	stored.Status.Restart.CompletedAt = &done
	stored.ResourceVersion = ""
	stored, err = dbs.UpdateStatus(ctx, stored, metav1.UpdateOptions{})
	require.NoError(t, err)
	dry, err := dbs.Restart(ctx, "shop", &examplev1.DatabaseRestart{Reason: "dry"}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	require.Equal(t, "dry", dry.Status.Restart.Reason)
	after, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, stored.ResourceVersion, after.ResourceVersion)
	require.Empty(t, after.Status.Restart.Reason)

	// On the wire the answer is a Database, 201 Created as for other creates.
	create(t, client, newDatabase(ns, "raw", examplev1.EngineMySQL, "8.0"))
	resp := do(t, http.MethodPost, databasesPath(ns)+"/raw/restart", []byte(`{"apiVersion":"example.com/v1","kind":"DatabaseRestart","reason":"raw"}`), nil)
	require.Equal(t, http.StatusCreated, resp.code, "%s", resp.body)
	var answer examplev1.Database
	require.NoError(t, json.Unmarshal(resp.body, &answer))
	require.Equal(t, "Database", answer.Kind)
	require.Equal(t, "raw", answer.Status.Restart.Reason)
}

// Neither a write of the Database nor one of its status can forge the
// records of databases/restart and databases/switchover; a status write
// completes only the stored restart.
// A restart is refused, and nothing recorded, while the controller would not carry it out:
// during a switchover, on a Failed Database; and a reason longer than a condition message
// is a 422.
func TestRestartIsRefusedWhileItCouldNotRun(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "shop", examplev1.EnginePostgreSQL, "16")
	db.Spec.Replicas = ptrInt32(2)
	db.Spec.Primary = "shop-1"
	db = create(t, client, db)
	db.Status.Primary = "shop-0"
	db, err := dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)

	_, err = dbs.Restart(ctx, "shop", &examplev1.DatabaseRestart{}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	require.ErrorContains(t, err, `a switchover to shop-1 is under way (spec.primary; status.primary is "shop-0")`)

	db.Status.Primary, db.Status.Phase = "shop-1", examplev1.DatabasePhaseFailed
	db, err = dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = dbs.Restart(ctx, "shop", &examplev1.DatabaseRestart{}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	require.ErrorContains(t, err, "the Database is Failed")

	db.Status.Phase = examplev1.DatabasePhaseReady
	db, err = dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = dbs.Restart(ctx, "shop", &examplev1.DatabaseRestart{Reason: strings.Repeat("x", 32769)}, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	require.ErrorContains(t, err, "reason: Too long: may not be more than 32768 bytes")
	// A reason that would fake lines or move the cursor where it is shown is a 422, as is
	// invalid UTF-8, which only protobuf carries (JSON decoding replaces it).
	protoCfg := rest.CopyConfig(server.ClientConfig)
	protoCfg.ContentType = runtime.ContentTypeProtobuf
	protoClient, err := versioned.NewForConfig(protoCfg)
	require.NoError(t, err)
	for _, tc := range []struct {
		client versioned.Interface
		reason string
		msg    string
	}{
		{client, "kernel\n  Completed At: now", "U+000A at byte 6"},
		{client, "\x1b[2Jcleared", "U+001B at byte 0"},
		{client, "ab\u202edc", "U+202E at byte 2"},
		{protoClient, "bad \xff byte", "invalid UTF-8 (byte 0xff) at byte 4"},
	} {
		_, err = tc.client.ExampleV1().Databases(ns).Restart(ctx, "shop", &examplev1.DatabaseRestart{Reason: tc.reason}, metav1.CreateOptions{})
		require.True(t, apierrors.IsInvalid(err), "%q: got %v", tc.reason, err)
		require.ErrorContains(t, err, "reason: Invalid value: must be printable UTF-8 without control characters (newlines, tabs, escape sequences): "+tc.msg)
	}

	stored, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Nil(t, stored.Status.Restart, "nothing recorded")
	require.Equal(t, db.ResourceVersion, stored.ResourceVersion)

	_, err = dbs.Restart(ctx, "shop", &examplev1.DatabaseRestart{Reason: strings.Repeat("x", 32768)}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func TestRequestRecordsCannotBeForged(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	create(t, client, newDatabase(ns, "shop", examplev1.EnginePostgreSQL, "16"))
	real, err := dbs.Restart(ctx, "shop", &examplev1.DatabaseRestart{}, metav1.CreateOptions{})
	require.NoError(t, err)
	want := real.Status.Restart.DeepCopy()

	forged := real.DeepCopy()
	forged.Status.Restart.RequestedBy = "mallory"
	forged.Status.Switchover = &examplev1.DatabaseSwitchoverStatus{RequestedBy: "mallory", Target: "shop-0", RequestedAt: metav1.Now()}
	out, err := dbs.Update(ctx, forged, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, want, out.Status.Restart)
	require.Nil(t, out.Status.Switchover)

	forged = out.DeepCopy()
	forged.Status.Restart.RequestedBy = "mallory"
	forged.Status.Restart.Reason = "forged"
	forged.Status.Switchover = &examplev1.DatabaseSwitchoverStatus{RequestedBy: "mallory", Target: "shop-0", RequestedAt: metav1.Now()}
	out, err = dbs.UpdateStatus(ctx, forged, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, want, out.Status.Restart)
	require.Nil(t, out.Status.Switchover)

	// A completion of another request (a stale copy) completes nothing.
	stale := out.DeepCopy()
	stale.Status.Restart.RequestedAt = metav1.NewMicroTime(want.RequestedAt.Add(-time.Hour))
	done := metav1.NowMicro()
	stale.Status.Restart.CompletedAt = &done
	out, err = dbs.UpdateStatus(ctx, stale, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, want, out.Status.Restart)

	// Nor can a create carry one.
	fresh := newDatabase(ns, "fresh", examplev1.EnginePostgreSQL, "16")
	fresh.Status.Restart = &examplev1.DatabaseRestartStatus{RequestedBy: "mallory", RequestedAt: metav1.NowMicro()}
	require.Nil(t, create(t, client, fresh).Status.Restart)
}

// A restart or switchover of a Database being deleted is a 409, and changes nothing.
func TestRequestsOfADatabaseBeingDeletedAreConflict(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "going", examplev1.EnginePostgreSQL, "16")
	db.Finalizers = []string{"example.com/test-hold"}
	create(t, client, db)
	require.NoError(t, dbs.Delete(ctx, "going", metav1.DeleteOptions{}))
	t.Cleanup(func() {
		_, _ = dbs.Patch(context.Background(), "going", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})

	_, err := dbs.Restart(ctx, "going", &examplev1.DatabaseRestart{}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	require.ErrorContains(t, err, "being deleted")
	_, err = dbs.Switchover(ctx, "going", &examplev1.DatabaseSwitchover{Target: "going-0"}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	require.ErrorContains(t, err, "being deleted")

	got, err := dbs.Get(ctx, "going", metav1.GetOptions{})
	require.NoError(t, err)
	require.Nil(t, got.Status.Restart)
	require.Empty(t, got.Spec.Primary)
}

// Bad requests to the subresources are 4xx naming the problem, and store nothing.
func TestSubresourceBadInputIsRefused(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	created := create(t, client, newDatabase(ns, "shop", examplev1.EnginePostgreSQL, "16"))
	base := databasesPath(ns) + "/shop"

	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		msg                      string
	}{
		{"unknown subresource", http.MethodPost, base + "/snapshot", `{}`, http.StatusNotFound, ""},
		{"unknown subresource get", http.MethodGet, base + "/snapshot", "", http.StatusNotFound, ""},
		{"backup body of another kind", http.MethodPost, base + "/backup", `{"apiVersion":"example.com/v1","kind":"DatabaseRestart"}`, http.StatusBadRequest, "cannot be handled as a DatabaseBackupRequest"},
		{"backup of a Database without spec.backup", http.MethodPost, base + "/backup", `{"apiVersion":"example.com/v1","kind":"DatabaseBackupRequest"}`, http.StatusConflict, "the Database has no spec.backup"},
		{"backup of a missing Database", http.MethodPost, databasesPath(ns) + "/missing/backup", `{"apiVersion":"example.com/v1","kind":"DatabaseBackupRequest"}`, http.StatusNotFound, ""},
		{"get of backup", http.MethodGet, base + "/backup", "", http.StatusMethodNotAllowed, ""},
		{"missing Database", http.MethodPost, databasesPath(ns) + "/missing/restart", `{"apiVersion":"example.com/v1","kind":"DatabaseRestart"}`, http.StatusNotFound, `databases.example.com "missing" not found`},
		{"malformed body", http.MethodPost, base + "/restart", `{"apiVersion":`, http.StatusBadRequest, ""},
		{"wrong kind", http.MethodPost, base + "/restart", `{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"shop"}}`, http.StatusBadRequest, "Database in version \"v1\" cannot be handled as a DatabaseRestart"},
		{"switchover body to restart", http.MethodPost, base + "/restart", `{"apiVersion":"example.com/v1","kind":"DatabaseSwitchover","target":"shop-0"}`, http.StatusBadRequest, "cannot be handled as a DatabaseRestart"},
		{"wrong group", http.MethodPost, base + "/restart", `{"apiVersion":"apps/v1","kind":"DatabaseRestart"}`, http.StatusBadRequest, ""},
		{"name mismatch", http.MethodPost, base + "/restart", `{"apiVersion":"example.com/v1","kind":"DatabaseRestart","metadata":{"name":"other"}}`, http.StatusBadRequest, `metadata.name of the DatabaseRestart, "other", does not match the Database "shop"`},
		{"switchover name mismatch", http.MethodPost, base + "/switchover", `{"apiVersion":"example.com/v1","kind":"DatabaseSwitchover","metadata":{"name":"other"},"target":"shop-0"}`, http.StatusBadRequest, "does not match"},
		{"switchover wrong kind", http.MethodPost, base + "/switchover", `{"apiVersion":"example.com/v1","kind":"DatabaseRestart"}`, http.StatusBadRequest, "cannot be handled as a DatabaseSwitchover"},
		{"switchover of a missing Database", http.MethodPost, databasesPath(ns) + "/missing/switchover", `{"apiVersion":"example.com/v1","kind":"DatabaseSwitchover","target":"missing-0"}`, http.StatusNotFound, ""},
		{"get of restart", http.MethodGet, base + "/restart", "", http.StatusMethodNotAllowed, ""},
		{"post to connection", http.MethodPost, base + "/connection", `{}`, http.StatusMethodNotAllowed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			resp := do(t, tc.method, tc.path, body, nil)
			require.Equal(t, tc.code, resp.code, "%s", resp.body)
			if tc.msg != "" {
				require.Contains(t, resp.status(t).Message, tc.msg)
			}
		})
	}

	got, err := client.ExampleV1().Databases(ns).Get(context.Background(), "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, created.ResourceVersion, got.ResourceVersion, "nothing was stored")
}

// A switchover sets spec.primary to a caught-up replica and records who
// asked; any other target is refused with the reason, and nothing changes.
func TestSwitchoverToACaughtUpReplicaSetsSpecPrimary(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "shop", examplev1.EnginePostgreSQL, "16")
	db.Spec.Replicas = ptrInt32(4)
	db = reportMembers(t, dbs, create(t, client, db),
		examplev1.DatabaseMember{Name: "shop-0", Role: examplev1.MemberRolePrimary, Ready: true},
		// A little behind under writes: the controller waits for it to catch up.
		examplev1.DatabaseMember{Name: "shop-1", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](4096)},
		examplev1.DatabaseMember{Name: "shop-2", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](64 << 20)},
		examplev1.DatabaseMember{Name: "shop-3", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: false},
	)

	for _, tc := range []struct {
		target string
		is     func(error) bool
		msg    string
	}{
		{"shop-2", apierrors.IsConflict, "shop-2 is not a caught-up replica: shop-2 is 67108864 bytes of WAL behind the primary shop-0 (at most 16777216)"},
		{"shop-3", apierrors.IsConflict, "shop-3 is not a caught-up replica: shop-3 does not stream from the primary shop-0"},
		{"shop-0", apierrors.IsConflict, "shop-0 is already the primary"},
		{"shop-4", apierrors.IsInvalid, `target: Unsupported value: "shop-4": supported values: "shop-0", "shop-1", "shop-2", "shop-3"`},
		{"other-1", apierrors.IsInvalid, `target: Unsupported value: "other-1"`},
		{"", apierrors.IsInvalid, "target: Required value"},
	} {
		_, err := dbs.Switchover(ctx, "shop", &examplev1.DatabaseSwitchover{Target: tc.target}, metav1.CreateOptions{})
		require.True(t, tc.is(err), "%q: got %v", tc.target, err)
		require.ErrorContains(t, err, tc.msg)
	}
	unchanged, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, db.ResourceVersion, unchanged.ResourceVersion, "refusals change nothing")

	got, err := dbs.Switchover(ctx, "shop", &examplev1.DatabaseSwitchover{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Target: "shop-1"}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, "shop-1", got.Spec.Primary)
	require.Equal(t, db.Generation+1, got.Generation, "spec.primary is a spec change")
	require.NotNil(t, got.Status.Switchover)
	require.Equal(t, user.APIServerUser, got.Status.Switchover.RequestedBy)
	require.Equal(t, "shop-1", got.Status.Switchover.Target)

	// Until the controller confirms shop-1, another switchover is refused.
	_, err = dbs.Switchover(ctx, "shop", &examplev1.DatabaseSwitchover{Target: "shop-2"}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	require.ErrorContains(t, err, "a switchover to shop-1 is under way")
}

// A switchover is refused, and nothing recorded, while the controller would not carry it
// out, as a restart is: while a restart is under way, on a Failed Database.
func TestSwitchoverIsRefusedWhileItCouldNotRun(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "shop", examplev1.EnginePostgreSQL, "16")
	db.Spec.Replicas = ptrInt32(2)
	db = reportMembers(t, dbs, create(t, client, db), caughtUp("shop")...)

	db, err := dbs.Restart(ctx, "shop", &examplev1.DatabaseRestart{Reason: "new kernel"}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = dbs.Switchover(ctx, "shop", &examplev1.DatabaseSwitchover{Target: "shop-1"}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	require.ErrorContains(t, err, `Operation cannot be fulfilled on databases.example.com "shop": a restart is under way: requested by `+user.APIServerUser)

	done := metav1.NowMicro()
	db.Status.Restart.CompletedAt = &done
	db.Status.Phase = examplev1.DatabasePhaseFailed
	db, err = dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = dbs.Switchover(ctx, "shop", &examplev1.DatabaseSwitchover{Target: "shop-1"}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	require.ErrorContains(t, err, "the Database is Failed (see its Ready condition); resolve that first")

	stored, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, db.ResourceVersion, stored.ResourceVersion, "nothing recorded")
	require.Empty(t, stored.Spec.Primary)
	require.Nil(t, stored.Status.Switchover)

	db.Status.Phase = examplev1.DatabasePhaseReady
	_, err = dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	got, err := dbs.Switchover(ctx, "shop", &examplev1.DatabaseSwitchover{Target: "shop-1"}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, "shop-1", got.Spec.Primary)
}

// MySQL reports no lag in bytes: a Ready replica that streams is a valid target.
func TestSwitchoverToAReplicaOfUnknownLagIsAccepted(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "orders", examplev1.EngineMySQL, "8.4")
	db.Spec.Replicas = ptrInt32(2)
	db = create(t, client, db)
	db.Status.Primary = "orders-0"
	db.Status.Members = []examplev1.DatabaseMember{
		{Name: "orders-0", Role: examplev1.MemberRolePrimary, Ready: true},
		{Name: "orders-1", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true},
	}
	_, err := dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)

	got, err := dbs.Switchover(ctx, "orders", &examplev1.DatabaseSwitchover{Target: "orders-1"}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, "orders-1", got.Spec.Primary)
}

// A MongoDB replica set takes a switchover as the other engines do: to a Ready replica that
// streams (its lag is reported in seconds, not bytes), refused with a Conflict otherwise.
func TestSwitchoverOfAMongoDBReplicaSet(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "docs", examplev1.EngineMongoDB, "7.0")
	db.Spec.Replicas = ptrInt32(3)
	db = create(t, client, db)
	db.Status.Primary = "docs-0"
	db.Status.Members = []examplev1.DatabaseMember{
		{Name: "docs-0", Role: examplev1.MemberRolePrimary, Ready: true},
		{Name: "docs-1", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagSeconds: ptr.To[int64](2)},
		{Name: "docs-2", Ready: true},
	}
	db, err := dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)

	_, err = dbs.Switchover(ctx, "docs", &examplev1.DatabaseSwitchover{Target: "docs-2"}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	require.ErrorContains(t, err, `docs-2 is not a caught-up replica: docs-2 is not a replica (role "")`)
	got, err := dbs.Get(ctx, "docs", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, db.ResourceVersion, got.ResourceVersion)

	got, err = dbs.Switchover(ctx, "docs", &examplev1.DatabaseSwitchover{Target: "docs-1"}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, "docs-1", got.Spec.Primary)
}

// Discovery lists the subresources with their verbs and kinds, and OpenAPI
// v2 and v3 have the kinds.
func TestSubresourcesAreInDiscoveryAndOpenAPI(t *testing.T) {
	resp := do(t, http.MethodGet, "/apis/example.com/v1", nil, nil)
	require.Equal(t, http.StatusOK, resp.code, "%s", resp.body)
	var list metav1.APIResourceList
	require.NoError(t, json.Unmarshal(resp.body, &list))
	byName := map[string]metav1.APIResource{}
	for _, r := range list.APIResources {
		byName[r.Name] = r
	}
	for name, want := range map[string]struct {
		kind  string
		verbs []string
	}{
		"databases/connection": {"DatabaseConnection", []string{"get"}},
		"databases/restart":    {"DatabaseRestart", []string{"create"}},
		"databases/switchover": {"DatabaseSwitchover", []string{"create"}},
	} {
		r, ok := byName[name]
		require.True(t, ok, "discovery lists %s", name)
		require.Equal(t, want.kind, r.Kind, name)
		require.ElementsMatch(t, want.verbs, []string(r.Verbs), name)
		require.True(t, r.Namespaced, name)
	}

	resp = do(t, http.MethodGet, "/openapi/v3/apis/example.com/v1", nil, nil)
	require.Equal(t, http.StatusOK, resp.code)
	for _, s := range []string{
		`"com.example.v1.DatabaseConnection"`, `"com.example.v1.DatabaseRestart"`, `"com.example.v1.DatabaseSwitchover"`,
		`/apis/example.com/v1/namespaces/{namespace}/databases/{name}/restart`,
	} {
		require.True(t, strings.Contains(string(resp.body), s), "OpenAPI v3 has %s", s)
	}
	resp = do(t, http.MethodGet, "/openapi/v2", nil, map[string]string{"Accept": "application/json"})
	require.Equal(t, http.StatusOK, resp.code)
	for _, s := range []string{`"com.example.v1.DatabaseConnection"`, `"com.example.v1.DatabaseRestart"`, `"com.example.v1.DatabaseSwitchover"`} {
		require.True(t, strings.Contains(string(resp.body), s), "OpenAPI v2 has %s", s)
	}
}

// reportMembers writes through databases/status what the controller reports of db's
// replication: members, the first of them as status.primary. It returns the stored Database.
func reportMembers(t *testing.T, dbs typedexamplev1.DatabaseInterface, db *examplev1.Database, members ...examplev1.DatabaseMember) *examplev1.Database {
	t.Helper()
	db = db.DeepCopy()
	db.Status.Primary = members[0].Name
	db.Status.Members = members
	db, err := dbs.UpdateStatus(context.Background(), db, metav1.UpdateOptions{})
	require.NoError(t, err)
	return db
}

// caughtUp are the members of a Database name of two Pods: name-0 the primary, name-1 a
// Ready replica streaming with no lag, the target a switchover accepts.
func caughtUp(name string) []examplev1.DatabaseMember {
	return []examplev1.DatabaseMember{
		{Name: name + "-0", Role: examplev1.MemberRolePrimary, Ready: true},
		{Name: name + "-1", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](0)},
	}
}

// A switchover asked while the controller fails over (status.failover in phase Promoting) is
// refused with a 409 naming the failover, and nothing is recorded; so is one asked while the
// primary takes no writes; once a primary takes writes, it is accepted.
func TestSwitchoverIsRefusedDuringAFailover(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "shop", examplev1.EnginePostgreSQL, "16")
	db.Spec.Replicas = ptrInt32(2)
	db = reportMembers(t, dbs, create(t, client, db), caughtUp("shop")...)
	db.Status.Failover = &examplev1.DatabaseFailoverStatus{From: "shop-0", To: "shop-1", Phase: examplev1.FailoverPhasePromoting,
		ReachableReplicas: 1, NeededReplicas: 1, StartTime: metav1.Now().Rfc3339Copy()}
	db, err := dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, "shop-1", db.Status.Failover.To, "status.failover is stored")

	_, err = dbs.Switchover(ctx, "shop", &examplev1.DatabaseSwitchover{Target: "shop-1"}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	require.ErrorContains(t, err, "a failover from shop-0 to shop-1 is under way (status.failover); ask again once it is done")
	stored, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, db.ResourceVersion, stored.ResourceVersion, "nothing recorded")

	// Before a failover is recorded, while the primary takes no writes: refused, saying so
	// rather than blaming the target.
	db.Status.Failover = nil
	db.Status.PrimaryLastWritableTime = ptr.To(metav1.Date(2026, 12, 4, 20, 8, 18, 0, time.UTC))
	db, err = dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = dbs.Switchover(ctx, "shop", &examplev1.DatabaseSwitchover{Target: "shop-1"}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	require.ErrorContains(t, err, "the primary shop-0 has taken no writes since 2026-12-04T20:08:18Z (status.primaryLastWritableTime)")

	db.Status.PrimaryLastWritableTime = nil
	_, err = dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = dbs.Switchover(ctx, "shop", &examplev1.DatabaseSwitchover{Target: "shop-1"}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// After a failover from the Pod spec.primary named when it was asked (status.lastFailoverTime
// after it), that spec.primary is no switchover under way: a restart and a switchover are
// accepted. A switchover asked since is one, and a write of the Database that changes
// spec.primary is recorded in status.switchover as the subresource's request is.
func TestRequestsAfterAFailoverFromSpecPrimary(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := failedOver(t, client, ns, "shop-0", metav1.Now().Rfc3339Copy())
	require.Nil(t, db.Status.Switchover, "spec.primary at creation is no request to move the primary")
	require.NotNil(t, db.Status.LastFailoverTime, "status.lastFailoverTime is stored")

	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	_, err := dbs.Restart(ctx, "shop", &examplev1.DatabaseRestart{Reason: "after the failover"}, dryRun)
	require.NoError(t, err, "spec.primary was asked before the failover: no switchover is under way")
	_, err = dbs.Switchover(ctx, "shop", &examplev1.DatabaseSwitchover{Target: "shop-0"}, metav1.CreateOptions{})
	require.NoError(t, err)
	db, err = dbs.Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "shop-0", db.Status.Switchover.Target)

	// The switchover asked since is under way: a restart waits for it.
	_, err = dbs.Restart(ctx, "shop", &examplev1.DatabaseRestart{}, dryRun)
	require.True(t, apierrors.IsConflict(err), "got %v", err)
	require.ErrorContains(t, err, "a switchover to shop-0 is under way")

	// A write of spec.primary is recorded as a request.
	db.Spec.Primary = "shop-1"
	db, err = dbs.Update(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, "shop-1", db.Status.Switchover.Target)
	require.NotEmpty(t, db.Status.Switchover.RequestedBy)
	require.False(t, db.Status.Switchover.RequestedAt.Before(db.Status.LastFailoverTime))
}

// A switchover accepted after a failover is recorded is acted on even when the controller's
// clock, which stamped status.lastFailoverTime, runs ahead of the API server's: the request
// is recorded one second after the failover.
func TestASwitchoverAfterAFailoverCountsWhateverTheClocks(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	ahead := metav1.NewTime(time.Now().Add(30 * time.Second)).Rfc3339Copy()
	failedOver(t, client, ns, "", ahead)

	got, err := dbs.Switchover(ctx, "shop", &examplev1.DatabaseSwitchover{Target: "shop-0"}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.True(t, ahead.Add(time.Second).Equal(got.Status.Switchover.RequestedAt.Time), "requested at %v", got.Status.Switchover.RequestedAt)
	require.Equal(t, "shop-0", examplev1.RequestedPrimary(got), "acted on")

	// So is a write of spec.primary.
	got.Spec.Primary = "shop-1"
	got, err = dbs.Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, "shop-1", examplev1.RequestedPrimary(got))
}

// failedOver creates the PostgreSQL Database shop of two Pods with spec.primary (empty for
// none) and reports it as a failover left it at lastFailover: shop-1 the primary, shop-0 a
// caught-up replica.
func failedOver(t *testing.T, client versioned.Interface, ns, primary string, lastFailover metav1.Time) *examplev1.Database {
	t.Helper()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "shop", examplev1.EnginePostgreSQL, "16")
	db.Spec.Replicas = ptrInt32(2)
	db.Spec.Primary = primary
	db = reportMembers(t, dbs, create(t, client, db),
		examplev1.DatabaseMember{Name: "shop-1", Role: examplev1.MemberRolePrimary, Ready: true},
		examplev1.DatabaseMember{Name: "shop-0", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](0)})
	db.Status.LastFailoverTime = &lastFailover
	db, err := dbs.UpdateStatus(context.Background(), db, metav1.UpdateOptions{})
	require.NoError(t, err)
	return db
}

// databases/backup records who asked for a backup and when, on a Database with spec.backup
// only; a second request is a 409 while the first is not started, and so is one while a
// backup Job runs; a status writer cannot forge or drop the record; a dry run records
// nothing.
func TestBackupRequestIsRecordedAndRefusedWhileOneIsPending(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	create(t, client, newDatabase(ns, "plain", examplev1.EnginePostgreSQL, "16"))
	_, err := dbs.Backup(ctx, "plain", &examplev1.DatabaseBackupRequest{}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "%v", err)
	require.Contains(t, err.Error(), "the Database has no spec.backup")

	db := newDatabase(ns, "shop", examplev1.EnginePostgreSQL, "16")
	db.Spec.Backup = &examplev1.DatabaseBackupPolicy{S3: examplev1.DatabaseBackupS3{
		Endpoint: "https://s3.example.com", Bucket: "backups", SecretName: "store"}}
	db = create(t, client, db)

	dry, err := dbs.Backup(ctx, "shop", &examplev1.DatabaseBackupRequest{}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	require.NotNil(t, dry.Status.Backup.Request)
	stored, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Nil(t, stored.Status.Backup, "a dry run records nothing")

	got, err := dbs.Backup(ctx, "shop", &examplev1.DatabaseBackupRequest{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	request := got.Status.Backup.Request
	require.NotNil(t, request)
	require.NotEmpty(t, request.RequestedBy)
	require.WithinDuration(t, time.Now(), request.RequestedAt.Time, time.Minute)
	require.Equal(t, db.Generation, got.Generation, "a request changes no spec")

	_, err = dbs.Backup(ctx, "shop", &examplev1.DatabaseBackupRequest{}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "%v", err)
	require.Contains(t, err.Error(), "is not started yet")

	// A status writer neither forges nor drops the request: the controller's write keeps it.
	forged := got.DeepCopy()
	forged.Status.Backup = &examplev1.DatabaseBackupStatus{ActiveJob: "shop-backup-1", LastScheduleTime: ptr.To(metav1.NewTime(request.RequestedAt.Add(time.Second))),
		Request: &examplev1.DatabaseBackupRequestStatus{RequestedBy: "mallory", RequestedAt: metav1.Now()}}
	out, err := dbs.UpdateStatus(ctx, forged, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, request, out.Status.Backup.Request)
	require.Equal(t, "shop-backup-1", out.Status.Backup.ActiveJob)
	dropped := out.DeepCopy()
	dropped.Status.Backup = nil
	out, err = dbs.UpdateStatus(ctx, dropped, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, request, out.Status.Backup.Request)

	// Started, and running: a new request waits for the Job to end.
	out.Status.Backup.ActiveJob = "shop-backup-1"
	out.Status.Backup.LastScheduleTime = ptr.To(metav1.NewTime(request.RequestedAt.Add(time.Second)))
	out, err = dbs.UpdateStatus(ctx, out, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = dbs.Backup(ctx, "shop", &examplev1.DatabaseBackupRequest{}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "%v", err)
	require.Contains(t, err.Error(), "a backup is running: Job shop-backup-1")

	// Ended: a new request is recorded.
	out.Status.Backup.ActiveJob = ""
	_, err = dbs.UpdateStatus(ctx, out, metav1.UpdateOptions{})
	require.NoError(t, err)
	time.Sleep(time.Second) // the record is to the second
	again, err := dbs.Backup(ctx, "shop", &examplev1.DatabaseBackupRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.True(t, again.Status.Backup.Request.RequestedAt.After(request.RequestedAt.Time))

	// Another Database's name in the body is a 400.
	_, err = dbs.Backup(ctx, "shop", &examplev1.DatabaseBackupRequest{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsBadRequest(err), "%v", err)
}
