package database

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"

	"example.com/database-apiserver/pkg/generated/clientset/versioned"
	"example.com/database-apiserver/pkg/generated/clientset/versioned/scheme"
)

// databaseOptions are the inputs every command on one Database shares: the Database's name
// (the command's one argument), the namespace kubectl's flags select, the clients and the
// streams.
type databaseOptions struct {
	Name      string
	Namespace string

	db   versioned.Interface
	kube kubernetes.Interface

	genericiooptions.IOStreams
}

// complete fills the options from args (exactlyOneName checked them) and kubectl's flags.
func (o *databaseOptions) complete(f *factory, args []string) error {
	o.Name = args[0]
	var err error
	if o.Namespace, err = f.namespace(); err != nil {
		return err
	}
	o.db, o.kube, err = f.clients()
	return err
}

// databaseCommand is the command "use" on one Database, NAME its one argument: it runs
// complete with the arguments, then run.
func databaseCommand(use, short, long, example string, complete func(args []string) error, run func(context.Context) error) *cobra.Command {
	return &cobra.Command{
		Use:     use,
		Short:   short,
		Long:    long,
		Example: example,
		Args:    exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := complete(args); err != nil {
				return err
			}
			return run(cmd.Context())
		},
	}
}

// exactlyOneName accepts one argument, the Database's name, and says what is missing or extra
// otherwise.
func exactlyOneName(cmd *cobra.Command, args []string) error {
	switch len(args) {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("a Database name is required: %s", cmd.UseLine())
	}
	return fmt.Errorf("one Database name is expected, got %d arguments %q: %s", len(args), args, cmd.UseLine())
}

// printedOptions are the output flags of a command that prints the Database the server
// answers with (-o json|yaml|name|...; without -o, "database.example.com/NAME <operation>").
type printedOptions struct {
	PrintFlags *genericclioptions.PrintFlags
	printer    printers.ResourcePrinter
}

// newPrintedOptions returns the output flags of operation, added to cmd.
func newPrintedOptions(cmd *cobra.Command, operation string) printedOptions {
	o := printedOptions{PrintFlags: genericclioptions.NewPrintFlags(operation).WithTypeSetter(scheme.Scheme)}
	o.PrintFlags.AddFlags(cmd)
	return o
}

// completePrinter makes the printer from the flags, once they are parsed.
func (o *printedOptions) completePrinter() error {
	var err error
	o.printer, err = o.PrintFlags.ToPrinter()
	return err
}
