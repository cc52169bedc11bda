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
	typedv1 "example.com/database-apiserver/pkg/generated/clientset/versioned/typed/example/v1"
	"example.com/database-apiserver/test/integration/framework"
)

// startWith starts a server with the admission configuration file config and
// returns a client of its Databases in namespace "configured"; the server
// stops with the test.
func startWith(t *testing.T, config string) typedv1.DatabaseInterface {
	t.Helper()
	configured, err := framework.Start("--admission-control-config-file=" + config)
	require.NoError(t, err)
	t.Cleanup(configured.Stop)
	client, err := versioned.NewForConfig(configured.ClientConfig)
	require.NoError(t, err)
	return client.ExampleV1().Databases("configured")
}

// newDatabase is a Database named name that omits replicas and storage.
func newDatabase(name string, engine examplev1.Engine, version string) *examplev1.Database {
	return &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: "configured", Name: name},
		Spec:       examplev1.DatabaseSpec{Engine: engine, Version: version},
	}
}

// The defaults come from --admission-control-config-file when it configures
// DatabaseDefaults (replicas 3 and storage 50Gi in the example file).
func TestAdmissionConfigurationFileOverridesDefaults(t *testing.T) {
	dbs := startWith(t, "../../../pkg/admission/databasedefaults/testdata/admission-config.yaml")
	got, err := dbs.Create(context.Background(), newDatabase("defaults", examplev1.EngineMySQL, "8.4"), metav1.CreateOptions{})
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
	dbs := startWith(t, "testdata/added-releases.yaml")
	_, err := dbs.Create(context.Background(), newDatabase("added", examplev1.EnginePostgreSQL, "18.6"), metav1.CreateOptions{})
	require.NoError(t, err)

	_, err = dbs.Create(context.Background(), newDatabase("unpublished", examplev1.EnginePostgreSQL, "18.7"), metav1.CreateOptions{})
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
