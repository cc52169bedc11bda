package databasevalidation

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/warning"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"

	// The engines register their catalogs.
	_ "example.com/database-apiserver/pkg/engine/engines"
)

var databasesGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "databases"}

// now is after the end of life of postgresql 13 (2025-11-13) and mysql 8.0
// (2026-04-30), before that of postgresql 14 (2026-11-12) and mysql 8.4.
var now = time.Date(2026, time.June, 1, 12, 0, 0, 0, time.UTC)

func database(engine example.Engine, version string) *example.Database {
	return &example.Database{
		ObjectMeta: metav1.ObjectMeta{Name: "my-database", Namespace: "production"},
		Spec: example.DatabaseSpec{
			Engine:   engine,
			Version:  version,
			Replicas: ptr.To[int32](3),
			Storage:  "100Gi",
		},
	}
}

func attributesFor(obj, old runtime.Object, resource schema.GroupVersionResource, subresource string) admission.Attributes {
	op := admission.Create
	if old != nil {
		op = admission.Update
	}
	return admission.NewAttributesRecord(obj, old, example.Kind("Database").WithVersion("v1"),
		"production", "my-database", resource, subresource, op, nil, false, nil)
}

// recorder collects warnings as the HTTP handler's recorder would.
type recorder struct{ warnings []string }

func (r *recorder) AddWarning(agent, text string) { r.warnings = append(r.warnings, text) }

// validate runs the plugin at now on a create (old nil) or update of the
// databases resource, and returns its error and the warnings it recorded.
func validate(t *testing.T, at time.Time, obj, old *example.Database) (error, []string) {
	t.Helper()
	rec := &recorder{}
	ctx := warning.WithWarningRecorder(context.Background(), rec)
	var oldObj runtime.Object
	if old != nil {
		oldObj = old
	}
	err := New(clocktesting.NewFakePassiveClock(at), nil).Validate(ctx, attributesFor(obj, oldObj, databasesGVR, ""), nil)
	return err, rec.warnings
}

// requireFieldError checks err is a 422 Invalid on the Database with one
// cause of type causeType on spec.version, whose message contains want.
func requireFieldError(t *testing.T, err error, causeType metav1.CauseType, want string) {
	t.Helper()
	require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
	status := err.(apierrors.APIStatus).Status()
	require.Equal(t, "example.com", status.Details.Group)
	require.Equal(t, "Database", status.Details.Kind)
	require.Equal(t, "my-database", status.Details.Name)
	require.Len(t, status.Details.Causes, 1)
	cause := status.Details.Causes[0]
	require.Equal(t, "spec.version", cause.Field)
	require.Equal(t, causeType, cause.Type)
	require.Contains(t, cause.Message, want)
}

// refusedVersion is a create (old nil) or update whose spec.version the
// plugin refuses with a message containing wantMsg.
type refusedVersion struct {
	name    string
	obj     *example.Database
	old     *example.Database
	wantMsg string
}

// requireRefused runs each case and requires a 422 with one cause of
// causeType on spec.version, printed as "spec.version: <prefix> "<version>"",
// and no warning.
func requireRefused(t *testing.T, tests []refusedVersion, causeType metav1.CauseType, prefix string) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err, warnings := validate(t, now, tc.obj, tc.old)
			requireFieldError(t, err, causeType, tc.wantMsg)
			require.Contains(t, err.Error(), `spec.version: `+prefix+` "`+tc.obj.Spec.Version+`"`)
			require.Empty(t, warnings)
		})
	}
}

func TestValidateRefusesVersionsOutsideTheCatalogWithTheSupportedList(t *testing.T) {
	requireRefused(t, []refusedVersion{
		{name: "postgresql major too old", obj: database(example.EnginePostgreSQL, "12"),
			wantMsg: `supported values: "13", "14", "15", "16", "17", "18"`},
		{name: "mysql 5.7", obj: database(example.EngineMySQL, "5.7"), wantMsg: `"8.0", "8.4", "9.0"`},
		{name: "mongodb latest", obj: database(example.EngineMongoDB, "latest"), wantMsg: `"6.0", "7.0", "8.0"`},
		{name: "update to a version outside the catalog", obj: database(example.EnginePostgreSQL, "14.5.1"),
			old: database(example.EnginePostgreSQL, "14.5"), wantMsg: `"14"`},
		{name: "the newest release of each line", obj: database(example.EnginePostgreSQL, "12"),
			wantMsg: "; or a published release of one of them, the newest being 13.23, 14.24, 15.19, 16.15, 17.11, 18.5"},
	}, metav1.CauseTypeFieldValueNotSupported, "Unsupported value:")
}

func TestValidateRefusesReleasesNeverPublishedWithTheLinesReleases(t *testing.T) {
	requireRefused(t, []refusedVersion{
		{name: "postgresql minor past the newest", obj: database(example.EnginePostgreSQL, "16.99"),
			wantMsg: `postgresql "16.99" is not a published release: the 16 line has 16.0 to 16.15, and "16" alone follows its newest release`},
		{name: "mongodb patch past the newest", obj: database(example.EngineMongoDB, "7.0.99"), wantMsg: "7.0.14 to 7.0.26"},
		{name: "mongodb patch of nine digits", obj: database(example.EngineMongoDB, "7.0.999999999"), wantMsg: "7.0.0 to 7.0.9"},
		{name: "mysql release withdrawn", obj: database(example.EngineMySQL, "8.0.29"), wantMsg: "8.0.11 to 8.0.28, 8.0.30 to 8.0.37"},
		{name: "update to a release never published", obj: database(example.EnginePostgreSQL, "14.99"),
			old: database(example.EnginePostgreSQL, "14.5"), wantMsg: "the 14 line has 14.0 to 14.24"},
	}, metav1.CauseTypeFieldValueInvalid, "Invalid value:")
}

func TestValidateKeepsAStoredVersionNeverPublishedUntilItChanges(t *testing.T) {
	stored := database(example.EnginePostgreSQL, "16.99")
	scaled := database(example.EnginePostgreSQL, "16.99")
	scaled.Spec.Replicas = ptr.To[int32](5)
	err, _ := validate(t, now, scaled, stored)
	require.NoError(t, err, "an update that keeps the version is not judged again")
}

func TestValidateRefusesUpgradesTheCatalogCallsUnsafe(t *testing.T) {
	tests := []struct {
		name     string
		engine   example.Engine
		from, to string
		wantMsg  string
	}{
		{name: "postgresql major needs pg_upgrade", engine: example.EnginePostgreSQL, from: "14.5", to: "15", wantMsg: "pg_upgrade"},
		{name: "postgresql downgrade", engine: example.EnginePostgreSQL, from: "15.2", to: "15.1", wantMsg: "downgrade"},
		{name: "mongodb major needs featureCompatibilityVersion stepping", engine: example.EngineMongoDB, from: "6.0", to: "7.0", wantMsg: "featureCompatibilityVersion"},
		{name: "mysql skips a release series", engine: example.EngineMySQL, from: "8.0.36", to: "9.7", wantMsg: "one release series at a time"},
		{name: "mysql downgrade across series", engine: example.EngineMySQL, from: "8.4", to: "8.0", wantMsg: "downgrade"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reason := catalog.CheckUpgrade(examplev1.Engine(tc.engine), tc.from, tc.to)
			require.Error(t, reason)
			err, _ := validate(t, now, database(tc.engine, tc.to), database(tc.engine, tc.from))
			requireFieldError(t, err, metav1.CauseTypeForbidden, reason.Error())
			require.Contains(t, err.Error(), tc.wantMsg)
		})
	}
}

func TestValidateAdmitsUpgradesSafeInPlace(t *testing.T) {
	tests := []struct {
		name     string
		engine   example.Engine
		from, to string
	}{
		{name: "postgresql minor", engine: example.EnginePostgreSQL, from: "14.5", to: "14.7"},
		{name: "postgresql pinned to floating in its line", engine: example.EnginePostgreSQL, from: "16.2", to: "16"},
		{name: "mysql one release series", engine: example.EngineMySQL, from: "8.4.2", to: "9.7"},
		{name: "mongodb patch", engine: example.EngineMongoDB, from: "7.0.12", to: "7.0.14"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err, warnings := validate(t, now, database(tc.engine, tc.to), database(tc.engine, tc.from))
			require.NoError(t, err)
			require.Empty(t, warnings)
		})
	}
}

func TestValidateWarnsAboutReleasesPastEndOfLife(t *testing.T) {
	tests := []struct {
		name     string
		at       time.Time
		obj      *example.Database
		old      *example.Database
		wantWarn []string // substrings of the one warning; nil for none
	}{
		{
			name: "create past end of life suggests the newest supported line",
			at:   now, obj: database(example.EnginePostgreSQL, "13.16"),
			wantWarn: []string{`spec.version: postgresql "13.16" is past end of life`, "2025-11-13", `use a supported release instead, such as "18"`},
		},
		{
			name: "update to an end-of-life release suggests the in-place upgrade",
			at:   now, obj: database(example.EngineMySQL, "8.0.40"), old: database(example.EngineMySQL, "8.0.36"),
			wantWarn: []string{`mysql "8.0.40"`, "2026-04-30", `upgrade in place to "8.4"`},
		},
		{
			name: "update with no supported release in place suggests a new Database",
			at:   now, obj: database(example.EnginePostgreSQL, "13.16"), old: database(example.EnginePostgreSQL, "13.15"),
			wantWarn: []string{`postgresql "13.16"`, "2025-11-13", `create a new Database at version "18"`},
		},
		{
			name: "on the end-of-life date itself",
			at:   time.Date(2025, time.November, 13, 0, 0, 0, 0, time.UTC), obj: database(example.EnginePostgreSQL, "13"),
			wantWarn: []string{`postgresql "13"`, "2025-11-13"},
		},
		{name: "the day before end of life", at: time.Date(2025, time.November, 12, 23, 59, 59, 0, time.UTC), obj: database(example.EnginePostgreSQL, "13")},
		{name: "a supported release", at: now, obj: database(example.EnginePostgreSQL, "17")},
		{name: "update keeping an end-of-life version is not warned again", at: now,
			obj: database(example.EnginePostgreSQL, "13.16"), old: database(example.EnginePostgreSQL, "13.16")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err, warnings := validate(t, tc.at, tc.obj, tc.old)
			require.NoError(t, err)
			if tc.wantWarn == nil {
				require.Empty(t, warnings)
				return
			}
			require.Len(t, warnings, 1)
			for _, want := range tc.wantWarn {
				require.Contains(t, warnings[0], want)
			}
		})
	}
}

func TestValidateDoesNotRejudgeAnUnchangedVersion(t *testing.T) {
	// A version no longer in the catalog must not block metadata, finalizer or
	// scaling updates of an existing Database.
	old := database(example.EnginePostgreSQL, "12")
	obj := old.DeepCopy()
	obj.Finalizers = []string{"database.example.com/finalizer"}
	obj.Spec.Replicas = ptr.To[int32](5)

	err, warnings := validate(t, now, obj, old)
	require.NoError(t, err)
	require.Empty(t, warnings)

	// The same object on create is judged, so the test above can fail.
	err, _ = validate(t, now, obj, nil)
	require.True(t, apierrors.IsInvalid(err))
}

func TestValidateLeavesFieldErrorsToTheStrategy(t *testing.T) {
	tests := []struct {
		name     string
		obj, old *example.Database
	}{
		{name: "unknown engine", obj: database("oracle", "19c")},
		{name: "empty engine", obj: database("", "14.5")},
		{name: "empty version", obj: database(example.EnginePostgreSQL, "")},
		// The engine is immutable (strategy); no upgrade across engines is judged.
		{name: "engine changed", obj: database(example.EngineMySQL, "8.4"), old: database(example.EnginePostgreSQL, "14.5")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err, warnings := validate(t, now, tc.obj, tc.old)
			require.NoError(t, err)
			require.Empty(t, warnings)
		})
	}
}

func TestValidateIgnoresSubresourcesAndOtherResources(t *testing.T) {
	tests := []struct {
		name        string
		resource    schema.GroupVersionResource
		subresource string
	}{
		{name: "status subresource", resource: databasesGVR, subresource: "status"},
		{name: "scale subresource", resource: databasesGVR, subresource: "scale"},
		{name: "another resource of the group", resource: databasesGVR.GroupVersion().WithResource("backups")},
	}
	plugin := New(clocktesting.NewFakePassiveClock(now), nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// An unsupported version and an unsafe upgrade: refused on the main resource.
			attrs := attributesFor(database(example.EnginePostgreSQL, "12"), database(example.EnginePostgreSQL, "18"), tc.resource, tc.subresource)
			require.NoError(t, plugin.Validate(context.Background(), attrs, nil))
		})
	}
}

func TestValidateRefusesAnotherObjectTypeForDatabases(t *testing.T) {
	plugin := New(clocktesting.NewFakePassiveClock(now), nil)
	err := plugin.Validate(context.Background(), attributesFor(&example.DatabaseList{}, nil, databasesGVR, ""), nil)
	require.True(t, apierrors.IsBadRequest(err), "got %v", err)
}

func TestPluginHandlesCreateAndUpdateOnly(t *testing.T) {
	plugin := New(clocktesting.NewFakePassiveClock(now), nil)
	for op, want := range map[admission.Operation]bool{
		admission.Create: true, admission.Update: true, admission.Delete: false, admission.Connect: false,
	} {
		require.Equal(t, want, plugin.Handles(op), "operation %s", op)
	}
}

func TestRegisteredPluginWithoutConfigurationAcceptsTheCatalogsReleases(t *testing.T) {
	plugins := admission.NewPlugins()
	Register(plugins)
	plugin, err := plugins.InitPlugin(PluginName, nil, admission.PluginInitializers{})
	require.NoError(t, err)
	require.Implements(t, (*admission.ValidationInterface)(nil), plugin)

	validator := plugin.(admission.ValidationInterface)
	require.NoError(t, validator.Validate(context.Background(), attributesFor(database(example.EnginePostgreSQL, "18.5"), nil, databasesGVR, ""), nil))
	err = validator.Validate(context.Background(), attributesFor(database(example.EnginePostgreSQL, "18.6"), nil, databasesGVR, ""), nil)
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
}

// validationConfig is an AdmissionConfiguration's configuration of the plugin
// with the given body after its apiVersion and kind.
func validationConfig(body string) *strings.Reader {
	return strings.NewReader("apiVersion: admission.example.com/v1alpha1\nkind: DatabaseValidationConfiguration\n" + body)
}

func TestRegisteredPluginAcceptsTheConfiguredReleases(t *testing.T) {
	plugins := admission.NewPlugins()
	Register(plugins)
	plugin, err := plugins.InitPlugin(PluginName, validationConfig(`releases:
- engine: postgresql
  versions: ["18.6", "17.12"]
- engine: mongodb
  versions: ["8.0.40"]
`), admission.PluginInitializers{})
	require.NoError(t, err)
	validator := plugin.(admission.ValidationInterface)
	for _, db := range []*example.Database{
		database(example.EnginePostgreSQL, "18.6"),
		database(example.EnginePostgreSQL, "17.12"),
		database(example.EngineMongoDB, "8.0.40"),
	} {
		require.NoError(t, validator.Validate(context.Background(), attributesFor(db, nil, databasesGVR, ""), nil), db.Spec.Version)
	}
	err = validator.Validate(context.Background(), attributesFor(database(example.EnginePostgreSQL, "18.7"), nil, databasesGVR, ""), nil)
	require.True(t, apierrors.IsInvalid(err), "got %v", err)
	require.ErrorContains(t, err, "18.0 to 18.5, 18.6")
}

func TestLoadConfigurationRefusesBadConfigurations(t *testing.T) {
	tests := []struct {
		name   string
		config *strings.Reader
		want   []string
	}{
		{"another kind", strings.NewReader("apiVersion: admission.example.com/v1alpha1\nkind: DatabaseDefaultsConfiguration\n"),
			[]string{`must have apiVersion "admission.example.com/v1alpha1" and kind "DatabaseValidationConfiguration"`, `got apiVersion "admission.example.com/v1alpha1" and kind "DatabaseDefaultsConfiguration"`}},
		{"no kind", strings.NewReader("releases: []\n"), []string{`kind "DatabaseValidationConfiguration", got apiVersion "" and kind ""`}},
		{"unknown field", validationConfig("release: []\n"), []string{`unknown field "release"`}},
		{"unknown engine", validationConfig("releases:\n- engine: oracle\n  versions: [\"19.3\"]\n"),
			[]string{`releases[0].engine: Unsupported value: "oracle"`}},
		{"engine twice", validationConfig("releases:\n- engine: mysql\n  versions: [\"8.4.12\"]\n- engine: mysql\n  versions: [\"9.7.3\"]\n"),
			[]string{`releases[1].engine: Duplicate value: "mysql"`}},
		{"no versions", validationConfig("releases:\n- engine: mysql\n"), []string{`releases[0].versions: Required value`}},
		{"a line alone", validationConfig("releases:\n- engine: postgresql\n  versions: [\"18\"]\n"),
			[]string{`releases[0].versions[0]: Invalid value: "18": must pin a release of one of the postgresql lines [13 14 15 16 17 18]`, `(e.g. "18.5")`}},
		{"a line outside the catalog", validationConfig("releases:\n- engine: postgresql\n  versions: [\"18.6\", \"19.0\"]\n"),
			[]string{`releases[0].versions[1]: Invalid value: "19.0"`}},
		{"a version twice", validationConfig("releases:\n- engine: mongodb\n  versions: [\"8.0.40\", \"8.0.40\"]\n"),
			[]string{`releases[0].versions[1]: Duplicate value: "8.0.40"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfiguration(tc.config)
			require.Error(t, err)
			for _, want := range tc.want {
				require.ErrorContains(t, err, want)
			}
		})
	}
}

func TestLoadConfigurationWithoutConfigurationAddsNothing(t *testing.T) {
	for name, config := range map[string]*strings.Reader{"none": nil, "no releases": validationConfig("")} {
		t.Run(name, func(t *testing.T) {
			var reader io.Reader
			if config != nil {
				reader = config
			}
			cfg, err := LoadConfiguration(reader)
			require.NoError(t, err)
			require.Equal(t, "admission.example.com/v1alpha1", cfg.APIVersion)
			require.Equal(t, ConfigurationKind, cfg.Kind)
			require.Empty(t, cfg.Releases)
			require.Empty(t, cfg.published())
		})
	}
}

func TestConfigurationDeepCopyIsIndependent(t *testing.T) {
	cfg := &Configuration{Releases: []EngineReleases{{Engine: example.EnginePostgreSQL, Versions: []string{"18.6"}}}}
	out := cfg.DeepCopyObject().(*Configuration)
	out.Releases[0].Versions[0] = "18.7"
	require.Equal(t, "18.6", cfg.Releases[0].Versions[0])
}
