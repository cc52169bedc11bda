// Command local-up runs the local control plane in the foreground (`make run`): kube-apiserver
// with our API server aggregated, database-controller, a simulated node, and the examples
// applied. State lives in
// $LOCAL_DIR (default .local); running again on it keeps every object. A part that exits is
// started again after a backoff, with a line on stdout; Ctrl-C or SIGTERM stops every part.
//
// As root on a machine with the container runtime installed, it also runs the real node. When
// the real node's binaries or images are not built yet and REAL_NODE_BUILD names the shell
// command that builds them (`make run` sets it), the cluster serves on its simulated node
// first; the build runs in the background (log: $LOCAL_DIR/logs/real-node-build.log), and
// when the real node has joined, the Pods of the example Database it can run
// (artifacts/examples/real-node) are deleted once, so that their StatefulSet makes them again
// on the real node. Pods of other Databases stay where they are.
//
// Arguments are extra flags for our API server (`make run APISERVER_ARGS=--v=4`).
// Environment: LOCAL_DIR, KUBE_APISERVER_PORT (default 6443; 0 picks a free port),
// DATABASE_APISERVER_PORT (default 0: a free port), CONTROLLER_ARGS (extra flags for the
// controller, space-separated, e.g. "--v=4"), REAL_NODE_BUILD (run with bash -c). Run from
// the repository root.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"example.com/database-apiserver/internal/localcluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "local-up:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := os.Getwd()
	if err != nil {
		return err
	}
	cfg, err := localcluster.DefaultConfig(root, envOr("LOCAL_DIR", ".local"))
	if err != nil {
		return err
	}
	if cfg.KubeAPIServerPort, err = envPort("KUBE_APISERVER_PORT", 6443); err != nil {
		return err
	}
	if cfg.APIServerPort, err = envPort("DATABASE_APISERVER_PORT", 0); err != nil {
		return err
	}
	cfg.APIServerArgs = os.Args[1:]
	cfg.ControllerArgs = strings.Fields(os.Getenv("CONTROLLER_ARGS"))
	if build := os.Getenv("REAL_NODE_BUILD"); build != "" {
		cfg.RealNodeBuild = []string{"bash", "-c", build}
	}
	cfg.Logf = func(format string, args ...any) {
		fmt.Printf("local-up: "+format+"\n", args...)
	}

	c, err := localcluster.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("local-up: stopping")
		c.Stop()
	}()

	examples := filepath.Join(root, "artifacts", "examples")
	if err := c.CreateMissing(ctx, examples); err != nil {
		return fmt.Errorf("applying %s: %w", examples, err)
	}
	realNode, noRealNode := c.RealNode()
	pending := c.RealNodePending()
	real := filepath.Join(examples, "real-node")
	if realNode || pending {
		if err := c.CreateMissing(ctx, real); err != nil {
			return fmt.Errorf("applying %s: %w", real, err)
		}
	}
	fmt.Printf(`
The local control plane is running (logs in %s).

  export KUBECONFIG=%s

  kubectl get db -A
  kubectl wait --for=condition=Ready db/my-database -n production --timeout=5m
  kubectl describe db my-database -n production
  kubectl get statefulsets,services,secrets,pvc -n production
  kubectl get db my-database -n production -o yaml
  kubectl scale db/my-database -n production --replicas=5
  kubectl explain databases.spec
  kubectl get nodes,pods,pvc -A

The controller's /healthz, /readyz and /metrics (HTTPS; /metrics needs get on it): %s
`, c.LogDir(), c.KubeconfigPath, c.ControllerURL)
	switch {
	case realNode:
		printRealNode()
	case pending:
		fmt.Printf("\nThe real node (%s), for the PostgreSQL 15 and 14.5 and MySQL 9.7 Pods, is being built in the background (log: %s).\n"+
			"Until it joins every Pod is simulated, production/my-database's and demo/shop's too; then they move to it, and local-up says how to use it.\n",
			localcluster.RealNodeName, c.RealNodeBuildLog())
	default:
		fmt.Printf("\nNo real node (%s): every Pod is simulated.\n", noRealNode)
	}
	fmt.Printf("\nCtrl-C stops it; the state stays in %s (make clean removes it).\n", c.Dir())

	if pending {
		go func() {
			if err := joinedRealNode(ctx, c, examples, real); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "local-up:", err)
			}
		}()
	}
	<-ctx.Done()
	return nil
}

// joinedRealNode waits for the real node being built in the background; once it has joined,
// it moves the examples' Pods created meanwhile (the Databases in examples, whose PostgreSQL
// 14.5 it runs, and in real) to it and prints how to use them.
func joinedRealNode(ctx context.Context, c *localcluster.Cluster, examples, real string) error {
	joined, why := c.WaitRealNode(ctx)
	if ctx.Err() != nil {
		return nil
	}
	if !joined {
		fmt.Printf("\nNo real node (%s): every Pod stays simulated.\n", why)
		return nil
	}
	moved, err := c.MoveToRealNode(ctx, examples, real)
	if err != nil {
		return fmt.Errorf("moving the Pods of %s and %s to the real node: %w", examples, real, err)
	}
	if len(moved) > 0 {
		fmt.Printf("local-up: real node: deleted %s (created on the simulated node before it joined); the StatefulSet makes them again on %s\n",
			strings.Join(moved, ", "), localcluster.RealNodeName)
	}
	printRealNode()
	return nil
}

func printRealNode() {
	fmt.Printf(`
A real node (%s) runs the PostgreSQL 15 and 14.5 and MySQL 9.7 Pods (production/my-database
replicates there); demo/shop is a database you can use:

  kubectl wait --for=condition=Ready db/shop -n demo --timeout=5m
  kubectl port-forward -n demo svc/shop 5432:5432 &
  PGPASSWORD=$(kubectl get secret shop-credentials -n demo -o jsonpath='{.data.password}' | base64 -d) \
    psql -h 127.0.0.1 -U app -d shop -c 'CREATE TABLE IF NOT EXISTS t (x int); INSERT INTO t VALUES (1); SELECT * FROM t'
`, localcluster.RealNodeName)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envPort(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	port, err := strconv.Atoi(v)
	if err != nil || port < 0 || port > 65535 {
		return 0, errors.New(name + " must be a port number (0 picks a free one)")
	}
	return port, nil
}
