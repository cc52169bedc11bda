package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group served by database-apiserver.
const GroupName = "example.com"

// SchemeGroupVersion is example.com/v1.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}

// Resource returns the group-qualified resource, e.g. Resource("databases").
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder registers the v1 types, their defaulters, conversions and field label conversions.
	SchemeBuilder      runtime.SchemeBuilder
	localSchemeBuilder = &SchemeBuilder
	// AddToScheme adds example.com/v1 to a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	// Generated defaulters and conversions register themselves on localSchemeBuilder.
	localSchemeBuilder.Register(addKnownTypes, addFieldLabelConversionFuncs)
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&Database{},
		&DatabaseList{},
		&DatabaseConnection{},
		&DatabaseRestart{},
		&DatabaseBackupRequest{},
		&DatabaseSwitchover{},
		&DatabaseBackup{},
		&DatabaseBackupList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
