// Package admissionconfig starts database-apiserver with admission
// configuration files. Each test starts its own server, so they live apart
// from the shared server of package integration (a process-wide metrics
// registry outlives a stopped server).
package admissionconfig

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
	configured, err := framework.Start("--admission-control-config-file=../../../pkg/admission/databasedefaults/testdata/admission-config.yaml")
	require.NoError(t, err)
	defer configured.Stop()
	client, err := versioned.NewForConfig(configured.ClientConfig)
	require.NoError(t, err)

	db := &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: "configured", Name: "defaults"},
		Spec:       examplev1.DatabaseSpec{Engine: examplev1.EngineMySQL, Version: "8.4"},
	}
	got, err := client.ExampleV1().Databases("configured").Create(context.Background(), db, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(3), *got.Spec.Replicas)
	require.Equal(t, "50Gi", got.Spec.Storage)
}

func TestInvalidAdmissionConfigurationStopsTheServerFromStarting(t *testing.T) {
	server, err := framework.Start("--admission-control-config-file=testdata/bad-defaults.yaml")
	if err == nil {
		server.Stop()
	}
	require.ErrorContains(t, err, "DatabaseDefaults")
	require.ErrorContains(t, err, "replicas")
}
