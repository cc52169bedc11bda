package database

import (
	"context"
	"errors"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

const switchoverLong = `Move a Database's primary to one of its replicas, named by its Pod. The API server accepts
only a replica that streams from the primary and has replayed what it sent; the controller
then stops the old primary, promotes the target and makes the old primary its standby.
MongoDB switches over by member priority, without stopping a Pod.

This creates databases/switchover (the "create" verb on the subresource, which the "edit"
and "admin" roles have). The request is recorded in the Database's status.switchover.`

const switchoverExample = `  # Make my-database-1 the primary of my-database
  kubectl database switchover my-database -n production --to my-database-1

  # Then wait until it is done
  kubectl wait --for=condition=Ready db/my-database -n production`

// SwitchoverOptions are the inputs of `kubectl database switchover NAME --to POD`.
type SwitchoverOptions struct {
	databaseOptions
	printedOptions
	// Target is --to: the Pod to become the primary.
	Target string
}

func newCmdSwitchover(f *factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &SwitchoverOptions{databaseOptions: databaseOptions{IOStreams: streams}}
	cmd := databaseCommand("switchover NAME --to POD", "Move a Database's primary to one of its replicas", switchoverLong, switchoverExample,
		func(args []string) error { return o.Complete(f, args) }, o.Run)
	cmd.Flags().StringVar(&o.Target, "to", "", "The Pod (NAME-<ordinal>) to become the primary: a replica that streams from the current primary.")
	// The printer's operation names the target, so the flags are added before it is known
	// and the operation set in Complete.
	o.printedOptions = newPrintedOptions(cmd, "")
	return cmd
}

// Complete fills the options from the arguments and kubectl's flags.
func (o *SwitchoverOptions) Complete(f *factory, args []string) error {
	if o.Target == "" {
		return errors.New("--to is required: the Pod to become the primary, e.g. --to " + args[0] + "-1")
	}
	o.PrintFlags.NamePrintFlags.Operation = "switchover to " + o.Target + " requested"
	if err := o.completePrinter(); err != nil {
		return err
	}
	return o.complete(f, args)
}

// Run creates databases/NAME/switchover and prints the Database the server returns.
func (o *SwitchoverOptions) Run(ctx context.Context) error {
	req := &examplev1.DatabaseSwitchover{
		TypeMeta:   metav1.TypeMeta{APIVersion: examplev1.SchemeGroupVersion.String(), Kind: "DatabaseSwitchover"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace},
		Target:     o.Target,
	}
	db, err := o.db.ExampleV1().Databases(o.Namespace).Switchover(ctx, o.Name, req, metav1.CreateOptions{})
	if err != nil {
		return onRequest(err, "create", "databases/switchover", o.Namespace)
	}
	return o.printer.PrintObj(db, o.Out)
}
