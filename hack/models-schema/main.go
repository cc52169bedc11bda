// Command models-schema prints the OpenAPI v2 definitions of every type in
// pkg/generated/openapi as one Swagger document on stdout. applyconfiguration-gen
// reads it to learn list types and map keys for server-side apply.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"example.com/database-apiserver/pkg/generated/openapi"
)

func main() {
	if err := write(); err != nil {
		fmt.Fprintf(os.Stderr, "models-schema: %v\n", err)
		os.Exit(1)
	}
}

func write() error {
	defs := openapi.GetOpenAPIDefinitions(func(name string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + name)
	})
	schemas := make(map[string]spec.Schema, len(defs))
	for name, def := range defs {
		schema := def.Schema
		// Types with a v3-only schema carry their v2 form in an extension.
		if v2, ok := def.Schema.Extensions[common.ExtensionV2Schema].(spec.Schema); ok {
			schema = v2
		}
		schemas[name] = schema
	}
	return json.NewEncoder(os.Stdout).Encode(&spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "database-apiserver", Version: "v1"}},
		Definitions: schemas,
	}})
}
