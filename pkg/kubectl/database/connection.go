package database

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/generated/clientset/versioned/scheme"
)

const connectionLong = `Show how to connect to a Database: the client host and port, the read host when it has
replicas, the database and user names, the Secret and the keys in it that hold the password
and the URIs, and whether it is ready to take connections.

The answer is the databases/connection subresource (a DatabaseConnection, example.com/v1),
which the "view" role may read: it never holds the password, only where to find it.`

const connectionExample = `  # How to connect to my-database
  kubectl database connection my-database -n production

  # The DatabaseConnection itself
  kubectl database connection my-database -n production -o yaml

  # Only the host
  kubectl database connection my-database -n production -o jsonpath='{.host}'`

// ConnectionOptions are the inputs of `kubectl database connection NAME`.
type ConnectionOptions struct {
	databaseOptions

	PrintFlags *genericclioptions.PrintFlags
	// printer is nil for the human-readable output (no --output).
	printer printers.ResourcePrinter
}

func newCmdConnection(f *factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &ConnectionOptions{
		databaseOptions: databaseOptions{IOStreams: streams},
		PrintFlags:      genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.Scheme),
	}
	cmd := databaseCommand("connection NAME", "Show how to connect to a Database (host, port, user, which Secret holds the password)",
		connectionLong, connectionExample, func(args []string) error { return o.Complete(f, args) }, o.Run)
	o.PrintFlags.AddFlags(cmd)
	return cmd
}

// Complete fills the options from the arguments and kubectl's flags.
func (o *ConnectionOptions) Complete(f *factory, args []string) error {
	if o.PrintFlags.OutputFormat != nil && *o.PrintFlags.OutputFormat != "" {
		var err error
		if o.printer, err = o.PrintFlags.ToPrinter(); err != nil {
			return err
		}
	}
	return o.complete(f, args)
}

// Run reads databases/NAME/connection and prints it.
func (o *ConnectionOptions) Run(ctx context.Context) error {
	conn, err := o.db.ExampleV1().Databases(o.Namespace).GetConnection(ctx, o.Name, metav1.GetOptions{})
	if err != nil {
		return onRequest(err, "get", "databases/connection", o.Namespace)
	}
	if o.printer != nil {
		return o.printer.PrintObj(conn, o.Out)
	}
	return printConnection(o.Out, conn)
}

// printConnection writes conn for a person: one "Field: value" line each, the Secret's keys
// named with the command that reads them.
func printConnection(out io.Writer, conn *examplev1.DatabaseConnection) error {
	w := newPrefixWriter(out)
	w.Write(0, "Name:\t%s\n", conn.Name)
	w.Write(0, "Namespace:\t%s\n", conn.Namespace)
	w.Write(0, "Engine:\t%s\n", conn.Engine)
	w.Write(0, "Host:\t%s\n", conn.Host)
	w.Write(0, "Port:\t%d\n", conn.Port)
	w.Write(0, "Read Host:\t%s\n", orNone(conn.ReadHost))
	w.Write(0, "Database:\t%s\n", orNone(conn.Database))
	w.Write(0, "Username:\t%s\n", conn.Username)
	w.Write(0, "Password:\t%s\n", secretKey(conn.SecretName, conn.PasswordKey))
	w.Write(0, "URI:\t%s\n", secretKey(conn.SecretName, conn.URIKey))
	w.Write(0, "Read URI:\t%s\n", secretKey(conn.SecretName, conn.ReadURIKey))
	w.Write(0, "Primary:\t%s\n", orNone(conn.Primary))
	ready := "False (not ready to take connections)"
	if conn.Ready {
		ready = "True"
	}
	w.Write(0, "Ready:\t%s\n", ready)
	if err := w.Flush(); err != nil {
		return err
	}
	if conn.SecretName != "" && conn.PasswordKey != "" {
		_, err := fmt.Fprintf(out, "\nThe password (for whoever may read the Secret):\n  kubectl get secret %s -n %s -o jsonpath='{.data.%s}' | base64 -d\n",
			conn.SecretName, conn.Namespace, conn.PasswordKey)
		return err
	}
	return nil
}

// secretKey names the key of the Secret, or <none> when the connection has no such key.
func secretKey(secret, key string) string {
	if secret == "" || key == "" {
		return "<none>"
	}
	return fmt.Sprintf("key %q of Secret %s", key, secret)
}
