// Package database holds the commands of the kubectl plugin kubectl-database: `kubectl
// database connection|restart|switchover|describe|status NAME`. Each command talks to the Database
// API (example.com/v1) and its subresources through kube-apiserver with the user's own
// credentials, so RBAC on databases, databases/connection, databases/restart and
// databases/switchover decides what a user may do.
package database

import (
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

const rootLong = `Operate the Databases (databases.example.com) of a namespace through their subresources.

Each command uses kubectl's flags and kubeconfig (--namespace, --context, --kubeconfig, --as, ...)
and the verb its subresource needs: "get" on databases/connection, "create" on databases/restart,
databases/switchover and databases/backup, "get" on databases (and list on its children) for
describe and status.`

const rootExample = `  # How to connect to the Database my-database (no password is shown)
  kubectl database connection my-database -n production

  # Restart its Pods one at a time
  kubectl database restart my-database -n production --reason "new kernel parameters"

  # Move the primary to the replica my-database-1
  kubectl database switchover my-database -n production --to my-database-1

  # Back it up now (it needs spec.backup)
  kubectl database backup my-database -n production

  # Spec, status, members and children of my-database
  kubectl database describe my-database -n production

  # Is it healthy, and if not, what is wrong?
  kubectl database status my-database -n production`

// NewCmdDatabase is the plugin's root command, "kubectl database", with kubectl's connection
// flags (genericclioptions.ConfigFlags) on every subcommand.
func NewCmdDatabase(streams genericiooptions.IOStreams) *cobra.Command {
	return newCmdDatabase(streams, time.Now)
}

// newCmdDatabase is NewCmdDatabase on the clock now (the ages describe shows).
func newCmdDatabase(streams genericiooptions.IOStreams, now func() time.Time) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true).WithWarningPrinter(streams)
	cmd := &cobra.Command{
		Use:   "database",
		Short: "Operate Databases (databases.example.com): connection, restart, switchover, describe, status",
		Long:  rootLong,
		// kubectl runs a plugin named kubectl-database as "kubectl database"; help and usage
		// lines say so.
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl database"},
		Example:       rootExample,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	flags.AddFlags(cmd.PersistentFlags())

	f := &factory{flags: flags, now: now}
	cmd.AddCommand(
		newCmdConnection(f, streams),
		newCmdRestart(f, streams),
		newCmdSwitchover(f, streams),
		newCmdBackup(f, streams),
		newCmdDescribe(f, streams),
		newCmdStatus(f, streams),
	)
	return cmd
}

// Run runs the plugin with the arguments args (os.Args[1:]) and returns its exit code: 0,
// or 1 after printing the error to streams.ErrOut as kubectl prints it.
func Run(args []string, streams genericiooptions.IOStreams) int {
	return run(args, streams, time.Now)
}

func run(args []string, streams genericiooptions.IOStreams, now func() time.Time) int {
	cmd := newCmdDatabase(streams, now)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		printError(streams.ErrOut, err)
		return 1
	}
	return 0
}
