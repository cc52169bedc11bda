package integration

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	applyYAML      = "application/apply-patch+yaml"
	mergePatch     = "application/merge-patch+json"
	strategicPatch = "application/strategic-merge-patch+json"
)

// A patch whose field has a value of the wrong type, a fraction for an
// integer or an integer too big for its field is a 422 Invalid that names the
// field and the value as sent, for server-side apply (which k8s.io/apiserver
// answers with a 500, or wraps 99999999999 into 1215752191) and for merge
// patches alike; nothing is written.
func TestPatchWithWrongFieldTypeIsInvalid(t *testing.T) {
	ns := namespace(t)
	client, _ := clientFor(t)
	create(t, client, newDatabase(ns, "typed", "postgresql", "16"))
	object := func(spec string) []byte {
		return fmt.Appendf(nil, `{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"typed","namespace":%q},"spec":%s}`, ns, spec)
	}
	for _, tc := range []struct {
		name, contentType, subresource string
		body                           []byte
		kind, field, value, detail     string
	}{
		{"apply a string", applyYAML, "", object(`{"engine":"postgresql","version":"16","replicas":"3"}`),
			"Database", "spec.replicas", `"3"`, "must be of type integer"},
		{"apply a fraction", applyYAML, "", object(`{"engine":"postgresql","version":"16","replicas":3.5}`),
			"Database", "spec.replicas", "3.5", "must be of type integer"},
		{"apply an int32 overflow", applyYAML, "", object(`{"engine":"postgresql","version":"16","replicas":99999999999}`),
			"Database", "spec.replicas", "99999999999", "must be an integer from -2147483648 to 2147483647"},
		{"apply YAML", applyYAML, "", []byte("apiVersion: example.com/v1\nkind: Database\nmetadata:\n  name: typed\nspec:\n  engine: postgresql\n  version: 16\n"),
			"Database", "spec.version", "16", "must be of type string"},
		{"apply a bool", applyYAML, "", object(`{"engine":"postgresql","version":"16","replicas":true}`),
			"Database", "spec.replicas", "true", "must be of type integer"},
		{"apply labels that are not a map", applyYAML, "",
			fmt.Appendf(nil, `{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"typed","labels":["a"]}}`),
			"Database", "metadata.labels", `"array"`, "must be of type object"},
		{"apply status", applyYAML, "status",
			[]byte(`{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"typed"},"status":{"readyReplicas":"1"}}`),
			"Database", "status.readyReplicas", `"1"`, "must be of type integer"},
		{"apply scale", applyYAML, "scale",
			[]byte(`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"typed"},"spec":{"replicas":"3"}}`),
			"Scale", "spec.replicas", `"3"`, "must be of type integer"},
		{"merge patch", mergePatch, "", []byte(`{"spec":{"replicas":"3"}}`),
			"Database", "spec.replicas", `"3"`, "must be of type integer"},
		{"strategic merge patch overflow", strategicPatch, "", []byte(`{"spec":{"replicas":99999999999}}`),
			"Database", "spec.replicas", "99999999999", "must be an integer from -2147483648 to 2147483647"},
		{"apply a time that is not one", applyYAML, "",
			fmt.Appendf(nil, `{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"typed","namespace":%q},"status":{"lastFailoverTime":"garbage"}}`, ns),
			"Database", "status.lastFailoverTime", `"garbage"`, "must be an RFC 3339 date and time"},
		{"apply a creation time that is not one", applyYAML, "",
			fmt.Appendf(nil, `{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"typed","namespace":%q,"creationTimestamp":"2026-12-04"}}`, ns),
			"Database", "metadata.creationTimestamp", `"2026-12-04"`, "must be an RFC 3339 date and time"},
		{"merge patch of a condition", mergePatch, "status", []byte(`{"status":{"conditions":[{"type":"Ready","observedGeneration":1.5}]}}`),
			"Database", "status.conditions[0].observedGeneration", "1.5", "must be of type integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := databasesPath(ns) + "/typed"
			if tc.subresource != "" {
				path += "/" + tc.subresource
			}
			r := do(t, http.MethodPatch, path+"?fieldManager=it", tc.body, map[string]string{"Content-Type": tc.contentType})
			require.Equal(t, http.StatusUnprocessableEntity, r.code, "%s", r.body)
			status := r.status(t)
			require.Equal(t, metav1.StatusReasonInvalid, status.Reason)
			require.Equal(t, tc.kind, status.Details.Kind)
			require.Equal(t, "typed", status.Details.Name)
			require.Len(t, status.Details.Causes, 1, "%s", r.body)
			require.Equal(t, tc.field, status.Details.Causes[0].Field)
			require.Contains(t, status.Message, tc.field+": Invalid value: "+tc.value+": "+tc.detail)
			require.NotContains(t, status.Message, "1215752191")
		})
	}

	got := do(t, http.MethodGet, databasesPath(ns)+"/typed", nil, nil)
	require.Equal(t, http.StatusOK, got.code)
	require.Contains(t, string(got.body), `"replicas":1,`)
	require.Contains(t, string(got.body), `"version":"16"`)
}

// Integral numbers are integers (3.0, 1e1), as the conversion takes them, and
// a well-typed apply goes through.
func TestPatchWithIntegralNumbersIsApplied(t *testing.T) {
	ns := namespace(t)
	for i, replicas := range []string{"3.0", "1e1", "2"} {
		name := fmt.Sprintf("integral-%d", i)
		body := fmt.Appendf(nil, `{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":%q},"spec":{"engine":"postgresql","version":"16","replicas":%s}}`, name, replicas)
		r := do(t, http.MethodPatch, databasesPath(ns)+"/"+name+"?fieldManager=it", body, map[string]string{"Content-Type": applyYAML})
		require.Equal(t, http.StatusCreated, r.code, "replicas %s: %s", replicas, r.body)
	}
}
