//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// kubectlDatabase runs `kubectl database args...` as admin, kubectl finding the plugin
// bin/kubectl-database (make build) on PATH, and returns stdout, stderr and the error.
func kubectlDatabase(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	plugin := filepath.Join(root, "bin", "kubectl-database")
	_, err := os.Stat(plugin)
	require.NoError(t, err, "the plugin is built by make build")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := kubectlCmd(ctx, cluster.KubeconfigPath, append([]string{"database"}, args...)...)
	cmd.Env = append(cmd.Env, "PATH="+filepath.Dir(plugin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	return stdout.String(), stderr.String(), err
}

// TestKubectlDatabasePlugin runs the plugin through kubectl against the control plane, as
// admin and as a user with the view role (impersonated with --as): view reads the status, the
// connection and the description, and is refused a restart, which admin may ask for.
func TestKubectlDatabasePlugin(t *testing.T) {
	applyExamples(t)
	const viewer = "e2e-plugin-viewer"
	kubectl(t, "create", "rolebinding", viewer, "-n", "production", "--clusterrole=view", "--user="+viewer)
	t.Cleanup(func() { kubectlAs(cluster.KubeconfigPath, "", "delete", "rolebinding", "-n", "production", viewer) })

	password := func() string {
		out := kubectl(t, "get", "secret", "my-database-credentials", "-n", "production", "-o", "jsonpath={.data.password}")
		require.NotEmpty(t, out)
		return out
	}

	t.Run("view reads the status of the example, healthy on the real node", func(t *testing.T) {
		var out string
		eventually(t, realPodTimeout, func() error {
			o, errOut, err := kubectlDatabase(t, "status", "my-database", "-n", "production", "--as", viewer)
			if err != nil {
				return fmt.Errorf("%w: %s", err, errOut)
			}
			if out = o; !strings.Contains(out, "\nProblems:  <none>\n") {
				return fmt.Errorf("not healthy yet:\n%s", out)
			}
			return nil
		})
		t.Logf("kubectl database status my-database -n production:\n%s", out)
		require.Contains(t, out, "Database:  production/my-database: postgresql 14.5, 3/3 ready, Ready\n")
		require.Regexp(t, `\nPrimary: +my-database-\d, taking writes\n`, out)
		require.Regexp(t, `\n  my-database-\d +Replica +true +true +\d+ B, \d+ s\n`, out)
		require.Contains(t, out, "\n  data-my-database-2  Bound")
	})

	t.Run("admin reads the connection", func(t *testing.T) {
		var out, errOut string
		eventually(t, 60*time.Second, func() error {
			var err error
			out, errOut, err = kubectlDatabase(t, "connection", "my-database", "-n", "production")
			if err != nil {
				return fmt.Errorf("%w: %s", err, errOut)
			}
			return nil
		})
		require.Contains(t, out, "Engine:     postgresql\n", errOut)
		require.Contains(t, out, `Password:   key "password" of Secret my-database-credentials`)
		require.Contains(t, out, "Host:       my-database.production.svc.cluster.local\n")

		out, errOut, err := kubectlDatabase(t, "connection", "my-database", "-n", "production", "-o", "yaml")
		require.NoError(t, err, errOut)
		var conn map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(out), &conn), out)
		require.Equal(t, "DatabaseConnection", conn["kind"])
		require.Equal(t, "my-database-credentials", conn["secretName"])
		require.NotContains(t, out, password())
	})

	t.Run("view reads the connection and the description", func(t *testing.T) {
		// The aggregation controller may need a moment to merge our rules into view.
		var out, errOut string
		eventually(t, 60*time.Second, func() error {
			var err error
			out, errOut, err = kubectlDatabase(t, "connection", "my-database", "-n", "production", "--as", viewer)
			if err != nil {
				return fmt.Errorf("%w: %s", err, errOut)
			}
			return nil
		})
		require.Contains(t, out, "Secret my-database-credentials", errOut)

		out, errOut, err := kubectlDatabase(t, "describe", "my-database", "-n", "production", "--as", viewer)
		require.NoError(t, err, errOut)
		require.Contains(t, out, "Name:")
		require.Contains(t, out, "  Engine:")
		require.Regexp(t, `\nStatefulSet: +my-database \(3 desired`, out)
		require.Regexp(t, `\nSecret: +my-database-credentials\n`, out)
		require.NotContains(t, out, password())
	})

	t.Run("view is refused a restart", func(t *testing.T) {
		dbs := clientset(t).ExampleV1().Databases("production")
		before, err := dbs.Get(context.Background(), "my-database", metav1.GetOptions{})
		require.NoError(t, err)

		out, errOut, err := kubectlDatabase(t, "restart", "my-database", "-n", "production", "--as", viewer)
		require.Error(t, err, out)
		require.Equal(t, 1, exitCode(err))
		require.Contains(t, errOut, "Error from server (Forbidden): ")
		require.Contains(t, errOut, `User "`+viewer+`" cannot create resource "databases/restart" in API group "example.com"`)
		require.Contains(t, errOut, `error: this needs "create" on "databases/restart"`)
		// The command it suggests gives the same answer.
		out, _, _ = kubectlAs(cluster.KubeconfigPath, "", "auth", "can-i", "create", "databases.example.com", "--subresource=restart", "-n", "production", "--as", viewer)
		require.Equal(t, "no\n", out)

		after, err := dbs.Get(context.Background(), "my-database", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, before.Status.Restart, after.Status.Restart, "a refused restart records nothing")
	})

	t.Run("admin asks for a restart", func(t *testing.T) {
		var out, errOut string
		eventually(t, 3*time.Minute, func() error {
			var err error
			out, errOut, err = kubectlDatabase(t, "restart", "my-database", "-n", "production", "--reason", "e2e plugin")
			if err != nil {
				return fmt.Errorf("%w: %s", err, errOut)
			}
			return nil
		})
		require.Equal(t, "database.example.com/my-database restart requested\n", out, errOut)
		db, err := clientset(t).ExampleV1().Databases("production").Get(context.Background(), "my-database", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, db.Status.Restart)
		require.Equal(t, "e2e plugin", db.Status.Restart.Reason)

		// Asked again at once, while the first is under way (it takes a Pod at a time).
		out, errOut, err = kubectlDatabase(t, "restart", "my-database", "-n", "production")
		require.Error(t, err, out)
		require.Equal(t, 1, exitCode(err))
		require.True(t, strings.HasPrefix(errOut, "Error from server (Conflict): "), errOut)
	})

	t.Run("a switchover to a replica that does not stream is refused", func(t *testing.T) {
		out, errOut, err := kubectlDatabase(t, "switchover", "my-database", "-n", "production", "--to", "my-database-1")
		require.Error(t, err, out)
		require.Equal(t, 1, exitCode(err))
		require.True(t, strings.HasPrefix(errOut, "Error from server ("), errOut)
	})
}

// exitCode is the exit status of a command that ran and failed, -1 for any other error.
func exitCode(err error) int {
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode()
	}
	return -1
}
