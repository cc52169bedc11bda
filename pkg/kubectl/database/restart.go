package database

import (
	"context"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

const restartLong = `Ask for a rolling restart of a Database's Pods: the controller restarts them one at a time,
the replicas before the primary. The request (who asked, when, why) is recorded in the
Database's status.restart and its Events.

This creates databases/restart (the "create" verb on the subresource, which the "edit" and
"admin" roles have). A restart asked for while one is under way, or of a Database being
deleted, is refused with a Conflict.`

const restartExample = `  # Restart my-database's Pods
  kubectl database restart my-database -n production

  # Say why (recorded in status.restart.reason)
  kubectl database restart my-database -n production --reason "pick up the new ConfigMap"

  # Print the Database the server returned
  kubectl database restart my-database -n production -o yaml`

// RestartOptions are the inputs of `kubectl database restart NAME`.
type RestartOptions struct {
	databaseOptions
	printedOptions
	Reason string
}

func newCmdRestart(f *factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &RestartOptions{databaseOptions: databaseOptions{IOStreams: streams}}
	cmd := databaseCommand("restart NAME [--reason TEXT]", "Restart a Database's Pods one at a time", restartLong, restartExample,
		func(args []string) error { return o.Complete(f, args) }, o.Run)
	cmd.Flags().StringVar(&o.Reason, "reason", "", "Why the restart is asked for, as printable text on one line (the server refuses control characters), recorded in the Database's status.restart.reason and its Event.")
	o.printedOptions = newPrintedOptions(cmd, "restart requested")
	return cmd
}

// Complete fills the options from the arguments and kubectl's flags.
func (o *RestartOptions) Complete(f *factory, args []string) error {
	if err := o.completePrinter(); err != nil {
		return err
	}
	return o.complete(f, args)
}

// Run creates databases/NAME/restart and prints the Database the server returns.
func (o *RestartOptions) Run(ctx context.Context) error {
	req := &examplev1.DatabaseRestart{
		TypeMeta:   metav1.TypeMeta{APIVersion: examplev1.SchemeGroupVersion.String(), Kind: "DatabaseRestart"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace},
		Reason:     o.Reason,
	}
	db, err := o.db.ExampleV1().Databases(o.Namespace).Restart(ctx, o.Name, req, metav1.CreateOptions{})
	if err != nil {
		return onRequest(err, "create", "databases/restart", o.Namespace)
	}
	return o.printer.PrintObj(db, o.Out)
}
