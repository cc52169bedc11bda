// Command database-controller runs each example.com Database as a StatefulSet with its
// Services and credentials. See pkg/controller/app for its options and wiring.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/component-base/cli"

	"example.com/database-apiserver/pkg/controller/app"
)

func main() {
	// The first SIGINT or SIGTERM cancels ctx (a graceful stop that releases the Lease);
	// a second one kills the process, since stop restores the default handlers.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	os.Exit(cli.Run(app.NewCommand(ctx, app.NewOptions())))
}
