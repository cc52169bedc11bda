package integration

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

func TestExampleAppliesUnchanged(t *testing.T) {
	client, _ := clientFor(t)
	data, err := os.ReadFile("../../artifacts/examples/database.yaml")
	require.NoError(t, err)
	var db examplev1.Database
	require.NoError(t, yaml.UnmarshalStrict(data, &db))
	db.Namespace = namespace(t) // the file says "production"; keep tests apart

	created := create(t, client, &db)
	require.Equal(t, examplev1.EnginePostgreSQL, created.Spec.Engine)
	require.Equal(t, "14.5", created.Spec.Version)
	require.Equal(t, int32(3), *created.Spec.Replicas)
	require.Equal(t, "100Gi", created.Spec.Storage)
	require.Equal(t, int64(1), created.Generation)
	require.Empty(t, created.Status.Phase, "status is the controller's to write")
}

func TestOmittedReplicasAndStorageAreDefaulted(t *testing.T) {
	ns := namespace(t)
	resp := do(t, http.MethodPost, databasesPath(ns),
		[]byte(`{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"defaults"},"spec":{"engine":"mysql","version":"8.4"}}`), nil)
	require.Equal(t, http.StatusCreated, resp.code, "%s", resp.body)

	client, _ := clientFor(t)
	got, err := client.ExampleV1().Databases(ns).Get(context.Background(), "defaults", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, got.Spec.Replicas)
	require.Equal(t, int32(1), *got.Spec.Replicas)
	require.Equal(t, "10Gi", got.Spec.Storage)
	require.Equal(t, examplev1.DeletionPolicyDelete, got.Spec.DeletionPolicy)
}

func TestInvalidDatabasesAreRefusedWith422NamingTheField(t *testing.T) {
	cases := []struct {
		name        string
		body        string
		field       string
		wantMessage []string
	}{
		{"explicit zero replicas", `{"metadata":{"name":"a"},"spec":{"engine":"mysql","version":"8.4","replicas":0}}`,
			"spec.replicas", []string{"0"}},
		{"eleven replicas", `{"metadata":{"name":"a"},"spec":{"engine":"mysql","version":"8.4","replicas":11}}`,
			"spec.replicas", []string{"cannot exceed 10"}},
		{"storage in GB", `{"metadata":{"name":"a"},"spec":{"engine":"mysql","version":"8.4","storage":"100GB"}}`,
			"spec.storage", []string{"100GB", "^[0-9]+Gi$"}},
		{"zero storage", `{"metadata":{"name":"a"},"spec":{"engine":"mysql","version":"8.4","storage":"0Gi"}}`,
			"spec.storage", []string{"0Gi"}},
		{"unknown engine", `{"metadata":{"name":"a"},"spec":{"engine":"oracle","version":"19"}}`,
			"spec.engine", []string{`Unsupported value: "oracle"`, `"mysql"`, `"postgresql"`, `"mongodb"`}},
		{"unknown deletion policy", `{"metadata":{"name":"a"},"spec":{"engine":"mysql","version":"8.4","deletionPolicy":"Keep"}}`,
			"spec.deletionPolicy", []string{`Unsupported value: "Keep"`, `"Delete"`, `"Retain"`, `"DoNotTerminate"`}},
		{"missing version", `{"metadata":{"name":"a"},"spec":{"engine":"mysql"}}`,
			"spec.version", []string{"Required value"}},
		{"version with no image", `{"metadata":{"name":"a"},"spec":{"engine":"postgresql","version":"12"}}`,
			"spec.version", []string{`Unsupported value: "12"`, "supported values", "the newest being 13.23, 14.24"}},
		{"release never published", `{"metadata":{"name":"a"},"spec":{"engine":"postgresql","version":"16.99"}}`,
			"spec.version", []string{`Invalid value: "16.99"`, "the 16 line has 16.0 to 16.15"}},
		{"patch of nine digits", `{"metadata":{"name":"a"},"spec":{"engine":"mongodb","version":"7.0.999999999"}}`,
			"spec.version", []string{`Invalid value: "7.0.999999999"`, "is not a published release"}},
		{"primary that is not one of its Pods", `{"metadata":{"name":"a"},"spec":{"engine":"postgresql","version":"16","replicas":2,"primary":"a-2"}}`,
			"spec.primary", []string{`Invalid value: "a-2"`, "must be one of the Database's Pods: a-0, a-1"}},
		{"primary with a leading zero", `{"metadata":{"name":"a"},"spec":{"engine":"postgresql","version":"16","primary":"a-00"}}`,
			"spec.primary", []string{`Invalid value: "a-00"`, "must be one of the Database's Pods: a-0"}},
		{"unknown failover policy", `{"metadata":{"name":"a"},"spec":{"engine":"postgresql","version":"16","replicas":2,"failover":"Sometimes"}}`,
			"spec.failover", []string{`Unsupported value: "Sometimes"`, `"Automatic"`, `"Manual"`}},
		{"failover delay of zero", `{"metadata":{"name":"a"},"spec":{"engine":"postgresql","version":"16","replicas":2,"failoverDelaySeconds":0}}`,
			"spec.failoverDelaySeconds", []string{"must be a number of seconds from 1 to 3600"}},
		{"failover delay above an hour", `{"metadata":{"name":"a"},"spec":{"engine":"mysql","version":"8.4","replicas":2,"failoverDelaySeconds":3601}}`,
			"spec.failoverDelaySeconds", []string{"3601", "from 1 to 3600"}},
		{"unknown durability", `{"metadata":{"name":"a"},"spec":{"engine":"mysql","version":"8.4","replicas":2,"durability":"Eventual"}}`,
			"spec.durability", []string{`Unsupported value: "Eventual"`, `"Asynchronous"`, `"Synchronous"`}},
		{"synchronous with one server", `{"metadata":{"name":"a"},"spec":{"engine":"postgresql","version":"16","durability":"Synchronous"}}`,
			"spec.durability", []string{"needs spec.replicas of 2 or more"}},
		{"failover on a replica set", `{"metadata":{"name":"a"},"spec":{"engine":"mongodb","version":"7.0","replicas":3,"failover":"Manual"}}`,
			"spec.failover", []string{"mongodb elects its primary among its members by itself"}},
		{"name that cannot be a Service", `{"metadata":{"name":"My_DB"},"spec":{"engine":"mysql","version":"8.4"}}`,
			"metadata.name", []string{"My_DB"}},
		{"name too long for the StatefulSet's Pods", `{"metadata":{"name":"` + strings.Repeat("a", 53) + `"},"spec":{"engine":"mysql","version":"8.4"}}`,
			"metadata.name", []string{"52"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t)
			body := `{"apiVersion":"example.com/v1","kind":"Database",` + strings.TrimPrefix(tc.body, "{")
			resp := do(t, http.MethodPost, databasesPath(ns), []byte(body), nil)
			require.Equal(t, http.StatusUnprocessableEntity, resp.code, "%s", resp.body)
			status := resp.status(t)
			require.Equal(t, metav1.StatusReasonInvalid, status.Reason)
			require.NotNil(t, status.Details)
			var fields []string
			for _, cause := range status.Details.Causes {
				fields = append(fields, cause.Field)
			}
			require.Contains(t, fields, tc.field, "message: %s", status.Message)
			for _, want := range tc.wantMessage {
				require.Contains(t, status.Message, want)
			}

			list := do(t, http.MethodGet, databasesPath(ns), nil, nil)
			require.Equal(t, http.StatusOK, list.code)
			require.Contains(t, string(list.body), `"items":[]`, "nothing is stored")
		})
	}
}

func TestMalformedJSONIsRefusedWith400AndNothingStored(t *testing.T) {
	ns := namespace(t)
	resp := do(t, http.MethodPost, databasesPath(ns), []byte(`{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"x"`), nil)
	require.Equal(t, http.StatusBadRequest, resp.code, "%s", resp.body)
	require.Equal(t, metav1.StatusReasonBadRequest, resp.status(t).Reason)

	resp = do(t, http.MethodPost, databasesPath(ns), []byte(`{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"x"},"spec":{"replicas":"three"}}`), nil)
	require.Equal(t, http.StatusBadRequest, resp.code, "%s", resp.body)

	list := do(t, http.MethodGet, databasesPath(ns), nil, nil)
	require.Contains(t, string(list.body), `"items":[]`)
}

func TestFourMebibyteBodyIsRefusedWith413AndNothingStored(t *testing.T) {
	ns := namespace(t)
	padding := strings.Repeat("a", 4<<20)
	body := `{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"big","annotations":{"pad":"` + padding + `"}},"spec":{"engine":"mysql","version":"8.4"}}`
	resp := do(t, http.MethodPost, databasesPath(ns), []byte(body), nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.code, "%.300s", resp.body)

	client, _ := clientFor(t)
	_, err := client.ExampleV1().Databases(ns).Get(context.Background(), "big", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "got %v", err)
}

func TestStrictFieldValidationNamesTheUnknownField(t *testing.T) {
	ns := namespace(t)
	body := []byte(`{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"strict"},"spec":{"engine":"mysql","version":"8.4","replica":3}}`)

	resp := do(t, http.MethodPost, databasesPath(ns)+"?fieldValidation=Strict", body, nil)
	require.Equal(t, http.StatusBadRequest, resp.code, "%s", resp.body)
	require.Contains(t, resp.status(t).Message, `unknown field "spec.replica"`)

	// The default (Warn) accepts the object and says what it dropped.
	resp = do(t, http.MethodPost, databasesPath(ns), body, nil)
	require.Equal(t, http.StatusCreated, resp.code, "%s", resp.body)
	require.Contains(t, resp.header.Get("Warning"), `unknown field \"spec.replica\"`)
}

func TestDryRunPersistsNothing(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)

	out, err := dbs.Create(ctx, newDatabase(ns, "dry", examplev1.EngineMySQL, "8.4"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	require.Equal(t, "dry", out.Name)
	_, err = dbs.Get(ctx, "dry", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "dry-run create stored the object: %v", err)

	real := create(t, client, newDatabase(ns, "dry", examplev1.EngineMySQL, "8.4"))
	real.Spec.Replicas = ptrInt32(4)
	_, err = dbs.Update(ctx, real, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	got, err := dbs.Get(ctx, "dry", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(1), *got.Spec.Replicas, "dry-run update changed the object")
	require.Equal(t, real.ResourceVersion, got.ResourceVersion)

	require.NoError(t, dbs.Delete(ctx, "dry", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}))
	_, err = dbs.Get(ctx, "dry", metav1.GetOptions{})
	require.NoError(t, err, "dry-run delete removed the object")
}

func ptrInt32(v int32) *int32 { return &v }

// A MongoDB replica set of an even number of members is accepted with a warning that says
// what the user gets, on create and on a scale through databases/scale.
func TestEvenMongoDBReplicaSetsAreWarnedAbout(t *testing.T) {
	ns := namespace(t)
	const warning = "spec.replicas: a MongoDB replica set of 2 voting members elects its primary by a majority of 2"
	body := []byte(`{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"docs"},"spec":{"engine":"mongodb","version":"7.0","replicas":2,"storage":"1Gi"}}`)
	resp := do(t, http.MethodPost, databasesPath(ns), body, nil)
	require.Equal(t, http.StatusCreated, resp.code, "%s", resp.body)
	require.Contains(t, resp.header.Get("Warning"), warning)

	resp = do(t, http.MethodPatch, databasesPath(ns)+"/docs/scale", []byte(`{"spec":{"replicas":1}}`),
		map[string]string{"Content-Type": "application/merge-patch+json"})
	require.Equal(t, http.StatusOK, resp.code, "%s", resp.body)
	require.Empty(t, resp.header.Get("Warning"))
	resp = do(t, http.MethodPatch, databasesPath(ns)+"/docs/scale", []byte(`{"spec":{"replicas":2}}`),
		map[string]string{"Content-Type": "application/merge-patch+json"})
	require.Equal(t, http.StatusOK, resp.code, "%s", resp.body)
	require.Contains(t, resp.header.Get("Warning"), warning)
}
