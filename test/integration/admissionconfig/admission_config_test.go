// Package admissionconfig starts database-apiserver with admission
// configuration files. Each test starts its own server, so they live apart
// from the shared server of package integration (a process-wide metrics
// registry outlives a stopped server).
package admissionconfig

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// A release published after the catalog was built is accepted once the
// DatabaseValidation configuration adds it (postgresql 18.6 in the file); a
// release neither lists is refused with the line's releases.
func TestAdmissionConfigurationFileAddsReleases(t *testing.T) {
	configured, err := framework.Start("--admission-control-config-file=testdata/added-releases.yaml")
	require.NoError(t, err)
	defer configured.Stop()
	client, err := versioned.NewForConfig(configured.ClientConfig)
	require.NoError(t, err)
	dbs := client.ExampleV1().Databases("configured")
	newDatabase := func(name, version string) *examplev1.Database {
		return &examplev1.Database{
			ObjectMeta: metav1.ObjectMeta{Namespace: "configured", Name: name},
			Spec:       examplev1.DatabaseSpec{Engine: examplev1.EnginePostgreSQL, Version: version},
		}
	}

	_, err = dbs.Create(context.Background(), newDatabase("added", "18.6"), metav1.CreateOptions{})
	require.NoError(t, err)

	_, err = dbs.Create(context.Background(), newDatabase("unpublished", "18.7"), metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	require.ErrorContains(t, err, `spec.version: Invalid value: "18.7"`)
	require.ErrorContains(t, err, "the 18 line has 18.0 to 18.5, 18.6")
}

func TestInvalidReleaseInTheConfigurationStopsTheServerFromStarting(t *testing.T) {
	server, err := framework.Start("--admission-control-config-file=testdata/bad-releases.yaml")
	if err == nil {
		server.Stop()
	}
	require.ErrorContains(t, err, "DatabaseValidation")
	require.ErrorContains(t, err, `releases[0].versions[0]: Invalid value: "19.0"`)
}
