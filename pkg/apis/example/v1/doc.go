// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=example.com/database-apiserver/pkg/apis/example
// +k8s:defaulter-gen=TypeMeta
// +k8s:openapi-gen=true
// +k8s:openapi-model-package=com.example.v1
// +groupName=example.com

// Package v1 is version v1 of the example.com API group: the wire format of
// Database. Its fields are those a Database CustomResourceDefinition would
// declare (spec.engine, version, replicas, storage; status.phase,
// readyReplicas, conditions), so clients of such a CRD work unchanged.
package v1
