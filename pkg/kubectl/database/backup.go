package database

import (
	"context"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

const backupLong = `Ask for a backup of a Database now, into the store of its spec.backup: the controller
starts a backup Job at once (or once the Database is Ready). The request (who asked, when) is
recorded in the Database's status.backup.request; status.backup and the BackedUp condition
follow the Job.

This creates databases/backup (the "create" verb on the subresource, which the "edit" and
"admin" roles have). A Database without spec.backup, a request while a backup runs or one
asked for is not started yet, and a Database being deleted are refused with a Conflict.`

const backupExample = `  # Back up my-database now
  kubectl database backup my-database -n production

  # Then follow it
  kubectl database status my-database -n production`

// BackupOptions are the inputs of "kubectl database backup NAME".
type BackupOptions struct {
	databaseOptions
	printedOptions
}

func newCmdBackup(f *factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &BackupOptions{databaseOptions: databaseOptions{IOStreams: streams}}
	cmd := databaseCommand("backup NAME", "Back up a Database now", backupLong, backupExample,
		func(args []string) error { return o.Complete(f, args) }, o.Run)
	o.printedOptions = newPrintedOptions(cmd, "backup requested")
	return cmd
}

// Complete fills the options from the arguments and kubectl's flags.
func (o *BackupOptions) Complete(f *factory, args []string) error {
	if err := o.completePrinter(); err != nil {
		return err
	}
	return o.complete(f, args)
}

// Run creates databases/NAME/backup and prints the Database the server returns.
func (o *BackupOptions) Run(ctx context.Context) error {
	req := &examplev1.DatabaseBackupRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: examplev1.SchemeGroupVersion.String(), Kind: "DatabaseBackupRequest"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace},
	}
	db, err := o.db.ExampleV1().Databases(o.Namespace).Backup(ctx, o.Name, req, metav1.CreateOptions{})
	if err != nil {
		return onRequest(err, "create", "databases/backup", o.Namespace)
	}
	return o.printer.PrintObj(db, o.Out)
}
