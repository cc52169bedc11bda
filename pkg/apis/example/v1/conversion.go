package v1

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
)

// Field selectors supported on databases, besides metadata.name and metadata.namespace.
const (
	FieldSpecEngine  = "spec.engine"
	FieldSpecVersion = "spec.version"
	FieldStatusPhase = "status.phase"
)

// FieldDatabase is the field selector supported on databasebackups, besides
// metadata.name and metadata.namespace: the Database a backup is of.
const FieldDatabase = "database"

// addFieldLabelConversionFuncs registers which field selectors example.com/v1
// accepts for Database and DatabaseBackup; any other label is refused with a
// 400 naming it.
func addFieldLabelConversionFuncs(scheme *runtime.Scheme) error {
	if err := scheme.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind("Database"),
		fieldLabels(FieldSpecEngine, FieldSpecVersion, FieldStatusPhase)); err != nil {
		return err
	}
	return scheme.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind("DatabaseBackup"),
		fieldLabels(FieldDatabase))
}

// fieldLabels accepts metadata.name, metadata.namespace and the labels given, as they are.
func fieldLabels(supported ...string) runtime.FieldLabelConversionFunc {
	return func(label, value string) (string, string, error) {
		if label == "metadata.name" || label == "metadata.namespace" || slices.Contains(supported, label) {
			return label, value, nil
		}
		return "", "", fmt.Errorf("field label not supported: %s", label)
	}
}
