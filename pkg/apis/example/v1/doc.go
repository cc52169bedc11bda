// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=example.com/database-apiserver/pkg/apis/example
// +k8s:defaulter-gen=TypeMeta
// +k8s:openapi-gen=true
// +k8s:openapi-model-package=com.example.v1
// +groupName=example.com

// Package v1 is version v1 of the example.com API group: the wire format of
// Database. Field names follow the seed CRD (shared/seed/seed-crd.yaml).
package v1
