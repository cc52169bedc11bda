package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/generated/clientset/versioned"
	"example.com/database-apiserver/test/integration/framework"
)

// The defaults come from --admission-control-config-file when it configures
// DatabaseDefaults (replicas 3 and storage 50Gi in the example file).
func TestAdmissionConfigurationFileOverridesDefaults(t *testing.T) {
	configured, err := framework.Start("--admission-control-config-file=../../pkg/admission/databasedefaults/testdata/admission-config.yaml")
	require.NoError(t, err)
	defer configured.Stop()
	client, err := versioned.NewForConfig(configured.ClientConfig)
	require.NoError(t, err)

	db := newDatabase("configured", "defaults", examplev1.EngineMySQL, "8.4")
	db.Spec.Replicas, db.Spec.Storage = nil, ""
	got, err := client.ExampleV1().Databases("configured").Create(context.Background(), db, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(3), *got.Spec.Replicas)
	require.Equal(t, "50Gi", got.Spec.Storage)
}

func TestInvalidAdmissionConfigurationStopsTheServerFromStarting(t *testing.T) {
	_, err := framework.Start("--admission-control-config-file=testdata/bad-defaults.yaml")
	require.ErrorContains(t, err, "DatabaseDefaults")
	require.ErrorContains(t, err, "replicas")
}
