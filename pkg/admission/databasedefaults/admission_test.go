package databasedefaults

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	apiserverinstall "k8s.io/apiserver/pkg/apis/apiserver/install"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/pkg/apis/example"
)

var databasesGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "databases"}

func database(replicas *int32, storage string) *example.Database {
	return &example.Database{
		ObjectMeta: metav1.ObjectMeta{Name: "my-database", Namespace: "production"},
		Spec: example.DatabaseSpec{
			Engine:   example.EnginePostgreSQL,
			Version:  "14.5",
			Replicas: replicas,
			Storage:  storage,
		},
	}
}

// configReader gives New the reader the admission machinery would: nil when
// there is no configuration.
func configReader(config string) io.Reader {
	if config == "" {
		return nil
	}
	return strings.NewReader(config)
}

func attributesFor(obj, old runtime.Object, op admission.Operation, resource schema.GroupVersionResource, subresource string) admission.Attributes {
	return admission.NewAttributesRecord(obj, old, example.Kind("Database").WithVersion("v1"),
		"production", "my-database", resource, subresource, op, nil, false, nil)
}

func TestAdmitFillsOnlyOmittedFields(t *testing.T) {
	tests := []struct {
		name         string
		config       string
		op           admission.Operation
		replicas     *int32
		storage      string
		wantReplicas int32
		wantStorage  string
	}{
		{name: "create with both omitted gets the package defaults", op: admission.Create, wantReplicas: 1, wantStorage: "10Gi"},
		{name: "update with both omitted gets the package defaults", op: admission.Update, wantReplicas: 1, wantStorage: "10Gi"},
		{name: "explicit values are kept", op: admission.Create, replicas: ptr.To[int32](3), storage: "100Gi", wantReplicas: 3, wantStorage: "100Gi"},
		{name: "explicit replicas 0 stays 0 for validation to refuse", op: admission.Create, replicas: ptr.To[int32](0), wantReplicas: 0, wantStorage: "10Gi"},
		{name: "only storage omitted", op: admission.Create, replicas: ptr.To[int32](5), wantReplicas: 5, wantStorage: "10Gi"},
		{
			name:   "configured defaults replace the package's",
			config: "apiVersion: admission.example.com/v1alpha1\nkind: DatabaseDefaultsConfiguration\nreplicas: 3\nstorage: 50Gi\n",
			op:     admission.Create, wantReplicas: 3, wantStorage: "50Gi",
		},
		{
			name:   "configured defaults do not override explicit values",
			config: "apiVersion: admission.example.com/v1alpha1\nkind: DatabaseDefaultsConfiguration\nreplicas: 3\nstorage: 50Gi\n",
			op:     admission.Create, replicas: ptr.To[int32](2), storage: "20Gi", wantReplicas: 2, wantStorage: "20Gi",
		},
		{
			name:   "a configuration with only storage keeps the default replicas",
			config: `{"apiVersion":"admission.example.com/v1alpha1","kind":"DatabaseDefaultsConfiguration","storage":"50Gi"}`,
			op:     admission.Create, wantReplicas: 1, wantStorage: "50Gi",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plugin, err := New(configReader(tc.config))
			require.NoError(t, err)
			require.True(t, plugin.Handles(tc.op))

			db := database(tc.replicas, tc.storage)
			var old runtime.Object
			if tc.op == admission.Update {
				old = database(ptr.To[int32](7), "70Gi")
			}
			attrs := attributesFor(db, old, tc.op, databasesGVR, "")
			require.NoError(t, plugin.Admit(context.Background(), attrs, nil))
			require.NotNil(t, db.Spec.Replicas)
			require.Equal(t, tc.wantReplicas, *db.Spec.Replicas)
			require.Equal(t, tc.wantStorage, db.Spec.Storage)

			// Reinvocation (admission may run mutating plugins twice) changes nothing.
			once := db.DeepCopy()
			require.NoError(t, plugin.Admit(context.Background(), attrs, nil))
			require.Equal(t, once, db)
		})
	}
}

func TestAdmitLeavesOtherRequestsAlone(t *testing.T) {
	tests := []struct {
		name        string
		resource    schema.GroupVersionResource
		subresource string
	}{
		{name: "status subresource", resource: databasesGVR, subresource: "status"},
		{name: "scale subresource", resource: databasesGVR, subresource: "scale"},
		{name: "another resource of the group", resource: databasesGVR.GroupVersion().WithResource("backups")},
		{name: "same resource name in another group", resource: schema.GroupVersionResource{Group: "other.example.com", Version: "v1", Resource: "databases"}},
	}
	plugin, err := New(nil)
	require.NoError(t, err)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := database(nil, "")
			attrs := attributesFor(db, database(nil, ""), admission.Update, tc.resource, tc.subresource)
			require.NoError(t, plugin.Admit(context.Background(), attrs, nil))
			require.Nil(t, db.Spec.Replicas)
			require.Empty(t, db.Spec.Storage)
		})
	}
}

func TestAdmitRefusesAnotherObjectTypeForDatabases(t *testing.T) {
	plugin, err := New(nil)
	require.NoError(t, err)
	attrs := attributesFor(&example.DatabaseList{}, nil, admission.Create, databasesGVR, "")
	err = plugin.Admit(context.Background(), attrs, nil)
	require.True(t, apierrors.IsBadRequest(err), "got %v", err)
}

func TestPluginHandlesCreateAndUpdateOnly(t *testing.T) {
	plugin, err := New(nil)
	require.NoError(t, err)
	for op, want := range map[admission.Operation]bool{
		admission.Create: true, admission.Update: true, admission.Delete: false, admission.Connect: false,
	} {
		require.Equal(t, want, plugin.Handles(op), "operation %s", op)
	}
}

func TestLoadConfigurationRefusesBadConfigurations(t *testing.T) {
	const header = "apiVersion: admission.example.com/v1alpha1\nkind: DatabaseDefaultsConfiguration\n"
	tests := []struct {
		name    string
		config  string
		wantErr string
	}{
		{name: "unknown field", config: header + "replicaz: 3\n", wantErr: `unknown field "replicaz"`},
		{name: "duplicate field", config: header + "replicas: 3\nreplicas: 4\n", wantErr: `key "replicas" already set`},
		{
			name:    "duplicate field in JSON, the form an AdmissionConfiguration passes on",
			config:  `{"apiVersion":"admission.example.com/v1alpha1","kind":"DatabaseDefaultsConfiguration","storage":"5Gi","storage":"6Gi"}`,
			wantErr: `duplicate field "storage"`,
		},
		{name: "replicas above the maximum", config: header + "replicas: 11\n", wantErr: "replicas"},
		{name: "explicit replicas 0", config: header + "replicas: 0\n", wantErr: "replicas"},
		{name: "storage not in whole gibibytes", config: header + "storage: 10GB\n", wantErr: "storage"},
		{name: "wrong kind", config: "apiVersion: admission.example.com/v1alpha1\nkind: DatabaseValidationConfiguration\n", wantErr: `got apiVersion "admission.example.com/v1alpha1" and kind "DatabaseValidationConfiguration"`},
		{name: "wrong apiVersion", config: "apiVersion: admission.example.com/v1\nkind: DatabaseDefaultsConfiguration\n", wantErr: `got apiVersion "admission.example.com/v1" and kind "DatabaseDefaultsConfiguration"`},
		{name: "missing apiVersion and kind", config: "replicas: 3\n", wantErr: `got apiVersion "" and kind ""`},
		{name: "empty document", config: "", wantErr: `must have apiVersion "admission.example.com/v1alpha1" and kind "DatabaseDefaultsConfiguration"`},
		{name: "replicas of the wrong type", config: header + "replicas: three\n", wantErr: "replicas"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := LoadConfiguration(strings.NewReader(tc.config))
			require.Error(t, err)
			require.Nil(t, cfg)
			require.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestLoadConfigurationWithoutConfigGivesThePackageDefaults(t *testing.T) {
	cfg, err := LoadConfiguration(nil)
	require.NoError(t, err)
	require.Equal(t, &Configuration{
		TypeMeta:       metav1.TypeMeta{APIVersion: "admission.example.com/v1alpha1", Kind: ConfigurationKind},
		Replicas:       ptr.To[int32](1),
		Storage:        "10Gi",
		DeletionPolicy: example.DeletionPolicyDelete,
	}, cfg)
}

func TestAdmitDefaultsDeletionPolicyOnlyWhenOmitted(t *testing.T) {
	tests := []struct {
		name   string
		config string
		given  example.DeletionPolicy
		want   example.DeletionPolicy
	}{
		{name: "omitted gets Delete", want: example.DeletionPolicyDelete},
		{name: "explicit Retain is kept", given: example.DeletionPolicyRetain, want: example.DeletionPolicyRetain},
		{
			name:   "configured default replaces Delete",
			config: "apiVersion: admission.example.com/v1alpha1\nkind: DatabaseDefaultsConfiguration\ndeletionPolicy: DoNotTerminate\n",
			want:   example.DeletionPolicyDoNotTerminate,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plugin, err := New(configReader(tc.config))
			require.NoError(t, err)
			db := database(nil, "")
			db.Spec.DeletionPolicy = tc.given
			require.NoError(t, plugin.Admit(context.Background(), attributesFor(db, nil, admission.Create, databasesGVR, ""), nil))
			require.Equal(t, tc.want, db.Spec.DeletionPolicy)
		})
	}
}

func TestLoadConfigurationRefusesAnUnknownDeletionPolicy(t *testing.T) {
	_, err := LoadConfiguration(strings.NewReader("apiVersion: admission.example.com/v1alpha1\nkind: DatabaseDefaultsConfiguration\ndeletionPolicy: Keep\n"))
	require.ErrorContains(t, err, `deletionPolicy: Unsupported value: "Keep"`)
	require.ErrorContains(t, err, `"Retain"`)
}

// The example file is a full --admission-control-config-file; read it as the
// server does and build the chain from it.
func TestAdmissionConfigurationFileOverridesDefaults(t *testing.T) {
	scheme := runtime.NewScheme()
	apiserverinstall.Install(scheme)
	provider, err := admission.ReadAdmissionConfiguration([]string{PluginName}, "testdata/admission-config.yaml", scheme)
	require.NoError(t, err)

	plugins := admission.NewPlugins()
	Register(plugins)
	chain, err := plugins.NewFromPlugins([]string{PluginName}, provider, admission.PluginInitializers{}, nil)
	require.NoError(t, err)

	db := database(nil, "")
	mutator, ok := chain.(admission.MutationInterface)
	require.True(t, ok)
	require.NoError(t, mutator.Admit(context.Background(), attributesFor(db, nil, admission.Create, databasesGVR, ""), nil))
	require.Equal(t, int32(3), *db.Spec.Replicas)
	require.Equal(t, "50Gi", db.Spec.Storage)
}

func TestRegisteredPluginRefusesToStartWithBadDefaults(t *testing.T) {
	plugins := admission.NewPlugins()
	Register(plugins)
	_, err := plugins.InitPlugin(PluginName,
		strings.NewReader("apiVersion: admission.example.com/v1alpha1\nkind: DatabaseDefaultsConfiguration\nreplicas: 11\n"),
		admission.PluginInitializers{})
	require.ErrorContains(t, err, PluginName)
	require.ErrorContains(t, err, "replicas")
}
