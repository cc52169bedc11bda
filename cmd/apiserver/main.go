// Command database-apiserver serves the example.com Database API. See
// pkg/apiserver for its options and wiring.
package main

import (
	"os"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"

	"example.com/database-apiserver/pkg/apiserver"
)

func main() {
	ctx := genericapiserver.SetupSignalContext()
	options := apiserver.NewOptions(os.Stdout, os.Stderr)
	os.Exit(cli.Run(apiserver.NewCommand(ctx, options)))
}
