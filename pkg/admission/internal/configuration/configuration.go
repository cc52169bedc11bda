// Package configuration decodes the typed configurations of this server's
// admission plugins, given in an AdmissionConfiguration
// (--admission-control-config-file), strictly: unknown and duplicate fields
// are errors that name the field, as for Kubernetes' own component
// configuration.
package configuration

import (
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// GroupVersion is the apiVersion of every plugin configuration:
// admission.example.com/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "admission.example.com", Version: "v1alpha1"}

// Decoder decodes the configuration of one plugin, of one kind.
type Decoder struct {
	plugin string
	gvk    schema.GroupVersionKind
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
}

// NewDecoder returns the decoder of plugin's configuration of kind, decoded
// into a new object of obj's type.
func NewDecoder(plugin, kind string, obj runtime.Object) *Decoder {
	scheme := runtime.NewScheme()
	gvk := GroupVersion.WithKind(kind)
	scheme.AddKnownTypeWithName(gvk, obj)
	utilruntime.Must(scheme.SetVersionPriority(GroupVersion))
	return &Decoder{plugin: plugin, gvk: gvk, scheme: scheme, codecs: serializer.NewCodecFactory(scheme, serializer.EnableStrict)}
}

// Load decodes the configuration in config (an empty one when config is
// nil: "no configuration"), sets its apiVersion and kind, and hands it to
// complete, which fills in defaults and returns what is invalid in it. It
// returns an error that says so when the document is not of the decoder's
// apiVersion and kind, has unknown or duplicate fields, cannot be read or
// parsed, or when complete finds errors (each names its field).
func (d *Decoder) Load(config io.Reader, complete func(runtime.Object) field.ErrorList) (runtime.Object, error) {
	obj, err := d.decode(config)
	if err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(d.gvk)
	if errs := complete(obj); len(errs) > 0 {
		return nil, fmt.Errorf("invalid %s: %w", d.gvk.Kind, errs.ToAggregate())
	}
	return obj, nil
}

func (d *Decoder) decode(config io.Reader) (runtime.Object, error) {
	if config == nil {
		return d.scheme.New(d.gvk)
	}
	data, err := io.ReadAll(config)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", d.gvk.Kind, err)
	}
	obj, gvk, err := d.codecs.UniversalDeserializer().Decode(data, nil, nil)
	if runtime.IsNotRegisteredError(err) || runtime.IsMissingKind(err) || runtime.IsMissingVersion(err) || (err == nil && *gvk != d.gvk) {
		return nil, d.wrongKindError(data)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", d.gvk.Kind, err)
	}
	return obj, nil
}

// wrongKindError says what the configuration must be and what data claims to
// be; the decoder's own message names the scheme, which means nothing to an
// operator.
func (d *Decoder) wrongKindError(data []byte) error {
	var got metav1.TypeMeta
	_ = utilyaml.Unmarshal(data, &got) // best effort: the error is about the kind either way
	return fmt.Errorf("the %s configuration must have apiVersion %q and kind %q, got apiVersion %q and kind %q",
		d.plugin, GroupVersion, d.gvk.Kind, got.APIVersion, got.Kind)
}
