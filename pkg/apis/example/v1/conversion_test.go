package v1_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"

	"example.com/database-apiserver/pkg/apis/example/install"
	v1 "example.com/database-apiserver/pkg/apis/example/v1"
)

func TestFieldLabelConversionAcceptsDocumentedSelectorsOnly(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	gvk := v1.SchemeGroupVersion.WithKind("Database")

	for _, label := range []string{"metadata.name", "metadata.namespace", "spec.engine", "spec.version", "status.phase"} {
		gotLabel, gotValue, err := scheme.ConvertFieldLabel(gvk, label, "x")
		require.NoError(t, err, label)
		require.Equal(t, label, gotLabel)
		require.Equal(t, "x", gotValue)
	}
	for _, label := range []string{"spec.replicas", "spec.storage", "status.readyReplicas", "metadata.labels"} {
		_, _, err := scheme.ConvertFieldLabel(gvk, label, "x")
		require.ErrorContains(t, err, "field label not supported: "+label)
	}
}
