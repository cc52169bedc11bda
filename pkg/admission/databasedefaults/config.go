package databasedefaults

import (
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"example.com/database-apiserver/pkg/admission/internal/configuration"
	"example.com/database-apiserver/pkg/apis/example"
	"example.com/database-apiserver/pkg/apis/example/validation"
)

// The defaults of a Database that omits spec.replicas, spec.storage or
// spec.deletionPolicy: one Pod with a 10Gi volume, deleted with its data. A
// DatabaseDefaultsConfiguration may replace each.
const (
	DefaultReplicas int32 = 1
	DefaultStorage        = "10Gi"
	// DefaultDeletionPolicy is the spec.deletionPolicy of a Database that omits it.
	DefaultDeletionPolicy = example.DeletionPolicyDelete
)

// ConfigurationGroupVersion is the apiVersion of the plugin's configuration:
// admission.example.com/v1alpha1.
var ConfigurationGroupVersion = configuration.GroupVersion

// ConfigurationKind is the kind of the plugin's configuration.
const ConfigurationKind = "DatabaseDefaultsConfiguration"

// Configuration is the DatabaseDefaultsConfiguration, given as the
// `configuration` of the DatabaseDefaults entry of an AdmissionConfiguration
// (--admission-control-config-file), or in the file its `path` names:
//
//	apiVersion: admission.example.com/v1alpha1
//	kind: DatabaseDefaultsConfiguration
//	replicas: 3
//	storage: 50Gi
//	deletionPolicy: Retain
//
// Omitted fields keep DefaultReplicas, DefaultStorage and
// DefaultDeletionPolicy.
type Configuration struct {
	metav1.TypeMeta `json:",inline"`

	// Replicas is the spec.replicas given to a Database that omits it:
	// a number of Pods, 1 to 10 as for spec.replicas itself.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Storage is the spec.storage given to a Database that omits it: the
	// volume size of each replica in whole gibibytes, e.g. "50Gi".
	// +optional
	Storage string `json:"storage,omitempty"`
	// DeletionPolicy is the spec.deletionPolicy given to a Database that omits
	// it: Delete, Retain or DoNotTerminate.
	// +optional
	DeletionPolicy example.DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// DeepCopyObject implements runtime.Object. Written by hand: the type is two
// scalars, so a shallow copy with a fresh Replicas pointer is a deep one.
func (c *Configuration) DeepCopyObject() runtime.Object {
	if c == nil {
		return nil
	}
	out := *c
	if c.Replicas != nil {
		r := *c.Replicas
		out.Replicas = &r
	}
	return &out
}

var decoder = configuration.NewDecoder(PluginName, ConfigurationKind, &Configuration{})

// LoadConfiguration reads a DatabaseDefaultsConfiguration (YAML or JSON) from
// config, which may be nil for "no configuration", and returns it with the
// package defaults filled in for omitted fields.
//
// It returns an error when the document is not an
// admission.example.com/v1alpha1 DatabaseDefaultsConfiguration, when it has
// unknown or duplicate fields, or when a default would itself fail
// validation.ValidateReplicas or validation.ValidateStorage (e.g. replicas 11,
// storage "10GB"); the error names the field.
func LoadConfiguration(config io.Reader) (*Configuration, error) {
	obj, err := decoder.Load(config, func(obj runtime.Object) field.ErrorList {
		cfg := obj.(*Configuration)
		if cfg.Replicas == nil {
			r := DefaultReplicas
			cfg.Replicas = &r
		}
		if cfg.Storage == "" {
			cfg.Storage = DefaultStorage
		}
		if cfg.DeletionPolicy == "" {
			cfg.DeletionPolicy = DefaultDeletionPolicy
		}
		return validateConfiguration(cfg)
	})
	if err != nil {
		return nil, err
	}
	return obj.(*Configuration), nil
}

// validateConfiguration holds the defaults to the rules the Database fields
// they fill in must pass, so a bad default stops the server at start rather
// than failing every create that omits the field.
func validateConfiguration(cfg *Configuration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validation.ValidateReplicas(*cfg.Replicas, field.NewPath("replicas"))...)
	errs = append(errs, validation.ValidateStorage(cfg.Storage, field.NewPath("storage"))...)
	errs = append(errs, validation.ValidateDeletionPolicy(cfg.DeletionPolicy, field.NewPath("deletionPolicy"))...)
	return errs
}
