package v1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

// Field selectors supported on databases, besides metadata.name and metadata.namespace.
const (
	FieldSpecEngine  = "spec.engine"
	FieldSpecVersion = "spec.version"
	FieldStatusPhase = "status.phase"
)

// addFieldLabelConversionFuncs registers which field selectors example.com/v1
// accepts for Database; any other label is refused with a 400 naming it.
func addFieldLabelConversionFuncs(scheme *runtime.Scheme) error {
	return scheme.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind("Database"),
		func(label, value string) (string, string, error) {
			switch label {
			case "metadata.name", "metadata.namespace", FieldSpecEngine, FieldSpecVersion, FieldStatusPhase:
				return label, value, nil
			default:
				return "", "", fmt.Errorf("field label not supported: %s", label)
			}
		})
}
