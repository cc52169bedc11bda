package databasevalidation

import (
	"fmt"
	"io"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"example.com/database-apiserver/pkg/admission/internal/configuration"
	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
)

// ConfigurationKind is the kind of the plugin's configuration, whose
// apiVersion is admission.example.com/v1alpha1.
const ConfigurationKind = "DatabaseValidationConfiguration"

// Configuration is the DatabaseValidationConfiguration, given as the
// `configuration` of the DatabaseValidation entry of an AdmissionConfiguration
// (--admission-control-config-file), or in the file its `path` names:
//
//	apiVersion: admission.example.com/v1alpha1
//	kind: DatabaseValidationConfiguration
//	releases:
//	- engine: postgresql
//	  versions: ["18.6", "17.12"]
//
// With no configuration, or no releases, the plugin accepts the catalog's
// published releases only.
type Configuration struct {
	metav1.TypeMeta `json:",inline"`

	// Releases are releases published after the catalog was built, accepted
	// as spec.version besides the catalog's own: at most one entry per engine.
	// +optional
	Releases []EngineReleases `json:"releases,omitempty"`
}

// EngineReleases are published releases of one engine.
type EngineReleases struct {
	// Engine is mysql, postgresql or mongodb.
	Engine example.Engine `json:"engine"`
	// Versions are releases of the engine's catalog lines, each written as
	// spec.version pins one ("18.6", "8.4.12", "8.0.21"); a line alone, or a
	// line the catalog does not have ("19.0"), is refused.
	Versions []string `json:"versions"`
}

// DeepCopyObject implements runtime.Object.
func (c *Configuration) DeepCopyObject() runtime.Object {
	if c == nil {
		return nil
	}
	out := &Configuration{TypeMeta: c.TypeMeta}
	for _, r := range c.Releases {
		out.Releases = append(out.Releases, EngineReleases{Engine: r.Engine, Versions: slices.Clone(r.Versions)})
	}
	return out
}

var decoder = configuration.NewDecoder(PluginName, ConfigurationKind, &Configuration{})

// LoadConfiguration reads a DatabaseValidationConfiguration (YAML or JSON)
// from config, which may be nil for "no configuration" (no releases added).
//
// It returns an error when the document is not an
// admission.example.com/v1alpha1 DatabaseValidationConfiguration, when it has
// unknown or duplicate fields, or when validateConfiguration refuses it; the
// error names the field.
func LoadConfiguration(config io.Reader) (*Configuration, error) {
	obj, err := decoder.Load(config, func(obj runtime.Object) field.ErrorList {
		return validateConfiguration(obj.(*Configuration))
	})
	if err != nil {
		return nil, err
	}
	return obj.(*Configuration), nil
}

// validateConfiguration requires each entry's engine to be a supported one,
// named once, with at least one version, each a release of one of the
// engine's catalog lines (catalog.IsRelease) and listed once.
func validateConfiguration(cfg *Configuration) field.ErrorList {
	var errs field.ErrorList
	engines := sets.New[example.Engine]()
	for i, r := range cfg.Releases {
		path := field.NewPath("releases").Index(i)
		switch {
		case !slices.Contains(example.SupportedEngines, r.Engine):
			errs = append(errs, field.NotSupported(path.Child("engine"), r.Engine, example.SupportedEngines))
			continue
		case engines.Has(r.Engine):
			errs = append(errs, field.Duplicate(path.Child("engine"), r.Engine))
		}
		engines.Insert(r.Engine)
		if len(r.Versions) == 0 {
			errs = append(errs, field.Required(path.Child("versions"), "list the releases to accept"))
		}
		versions := sets.New[string]()
		for j, v := range r.Versions {
			vpath := path.Child("versions").Index(j)
			switch {
			case versions.Has(v):
				errs = append(errs, field.Duplicate(vpath, v))
			case !catalog.IsRelease(examplev1.Engine(r.Engine), v):
				errs = append(errs, field.Invalid(vpath, v, fmt.Sprintf(
					"must pin a release of one of the %s lines %v, as spec.version does (e.g. %q)",
					r.Engine, catalog.Lines(examplev1.Engine(r.Engine)), slices.Max(catalog.NewestReleases(examplev1.Engine(r.Engine))))))
			}
			versions.Insert(v)
		}
	}
	return errs
}

// published is the set of releases cfg adds to the catalog's.
func (cfg *Configuration) published() catalog.Published {
	p := catalog.Published{}
	for _, r := range cfg.Releases {
		for _, v := range r.Versions {
			p.Add(examplev1.Engine(r.Engine), v)
		}
	}
	return p
}
