package install_test

import (
	"math/rand"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"

	examplefuzzer "example.com/database-apiserver/pkg/apis/example/fuzzer"
	"example.com/database-apiserver/pkg/apis/example/install"
	v1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// TestRoundTripTypes converts random internal objects of every group
// install.Install registers (example.com Database, DatabaseList and the
// kinds of the connection, restart and switchover subresources, and the
// autoscaling Scale the scale subresource serves) to each served version and
// back through JSON and through protobuf, requiring them unchanged. Protobuf
// is what clients preferring it (our clientset by default, the namespace
// controller) read and write, so generated.pb.go must carry every field the
// JSON form does.
func TestRoundTripTypes(t *testing.T) {
	roundtrip.RoundTripProtobufTestForAPIGroup(t, install.Install, examplefuzzer.Funcs)
}

// TestRoundTripExternalTypes sends random v1 Databases, DatabaseLists,
// DatabaseConnections, DatabaseRestarts, DatabaseSwitchovers and
// autoscaling/v1 Scales, fuzzed as wire objects with no constraint on their
// values, through JSON and protobuf and back, requiring them unchanged.
func TestRoundTripExternalTypes(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	codecs := serializer.NewCodecFactory(scheme)
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(rand.Int63()), codecs)
	for _, gvk := range []schema.GroupVersionKind{
		v1.SchemeGroupVersion.WithKind("Database"),
		v1.SchemeGroupVersion.WithKind("DatabaseList"),
		v1.SchemeGroupVersion.WithKind("DatabaseConnection"),
		v1.SchemeGroupVersion.WithKind("DatabaseRestart"),
		v1.SchemeGroupVersion.WithKind("DatabaseSwitchover"),
		autoscalingv1.SchemeGroupVersion.WithKind("Scale"),
	} {
		t.Run(gvk.Kind, func(t *testing.T) {
			roundtrip.RoundTripSpecificKind(t, gvk, scheme, codecs, f, nil)
		})
	}
}

// TestRoundTripToUnstructured sends random v1 Databases, DatabaseLists, the
// subresources' kinds and autoscaling/v1 Scales (fuzzed as internal objects, then converted) through
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
		v1.SchemeGroupVersion.WithKind("DatabaseConnection"),
		v1.SchemeGroupVersion.WithKind("DatabaseRestart"),
		v1.SchemeGroupVersion.WithKind("DatabaseSwitchover"),
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
