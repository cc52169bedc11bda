// Command kubectl-database is the kubectl plugin "kubectl database": on PATH, kubectl runs it
// for `kubectl database ...`. The commands are in pkg/kubectl/database.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"example.com/database-apiserver/pkg/kubectl/database"
)

func main() {
	os.Exit(database.Run(os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}
