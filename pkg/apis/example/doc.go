// +k8s:deepcopy-gen=package
// +groupName=example.com

// Package example holds the internal (hub) types of the example.com API group.
// Every served version converts to and from these types; the registry,
// validation and admission work on them only.
package example
