package install_test

import (
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	examplefuzzer "example.com/database-apiserver/pkg/apis/example/fuzzer"
	"example.com/database-apiserver/pkg/apis/example/install"
	v1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// TestRoundTripTypes converts random internal objects of every group
// install.Install registers (example.com Database and DatabaseList, and the
// autoscaling Scale the scale subresource serves) to each served version and
// back through JSON, and random v1 objects through JSON, requiring them
// unchanged. Protobuf is skipped: the types do not implement it (the server
// does not negotiate it either).
func TestRoundTripTypes(t *testing.T) {
	roundtrip.RoundTripTestForAPIGroup(t, install.Install, examplefuzzer.Funcs)
}

// TestRoundTripToUnstructured sends random v1 Databases, DatabaseLists and
// autoscaling/v1 Scales (fuzzed as internal objects, then converted) through
// JSON and CBOR into Unstructured and back, as server-side apply, the dynamic
// client and the garbage collector see them, requiring them unchanged. The
// other kinds in the scheme (options types, autoscaling kinds we do not
// serve) are not ours and are skipped.
func TestRoundTripToUnstructured(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)

	ours := sets.New(
		v1.SchemeGroupVersion.WithKind("Database"),
		v1.SchemeGroupVersion.WithKind("DatabaseList"),
		autoscalingv1.SchemeGroupVersion.WithKind("Scale"),
	)
	skipped := sets.New[schema.GroupVersionKind]()
	for gvk := range scheme.AllKnownTypes() {
		if !ours.Has(gvk) {
			skipped.Insert(gvk)
		}
	}
	roundtrip.RoundtripToUnstructured(t, scheme, examplefuzzer.Funcs, skipped, nil)
}
