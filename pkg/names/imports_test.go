package names_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// controllerPackages is the import path prefix of the controller's packages.
const controllerPackages = "example.com/database-apiserver/pkg/controller"

// deps is every package pkg builds from, as `go list -deps` lists them (tests excluded).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	// go test puts its own go first on the PATH of the tests it runs.
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
	}
	require.NoError(t, err)
	return strings.Fields(string(out))
}

// controllerDeps are the packages under pkg/controller among pkg's dependencies.
func controllerDeps(t *testing.T, pkg string) []string {
	var found []string
	for _, d := range deps(t, pkg) {
		if d == controllerPackages || strings.HasPrefix(d, controllerPackages+"/") {
			found = append(found, d)
		}
	}
	return found
}

// TestOnlyTheControllerImportsTheController pins that the API server, the kubectl plugin
// and the local cluster build from no package under pkg/controller: what they share with
// the controller (names, labels, hosts, the Secret's keys, the engines' recipes, condition
// types) lives in packages none of them owns. The controller's own binary is listed too, so
// the test shows it sees such an import.
func TestOnlyTheControllerImportsTheController(t *testing.T) {
	for _, pkg := range []string{
		"example.com/database-apiserver/cmd/apiserver",
		"example.com/database-apiserver/cmd/kubectl-database",
		"example.com/database-apiserver/internal/localcluster",
	} {
		require.Empty(t, controllerDeps(t, pkg), "%s imports the controller's packages", pkg)
	}
	require.Contains(t, controllerDeps(t, "example.com/database-apiserver/cmd/controller"), controllerPackages+"/database")
}

// driverPackages are the import path prefixes of the engines' drivers.
var driverPackages = []string{"github.com/jackc/pgx", "github.com/go-sql-driver/mysql", "go.mongodb.org/mongo-driver"}

// driverDeps are the engines' driver packages among pkg's dependencies.
func driverDeps(t *testing.T, pkg string) []string {
	var found []string
	for _, d := range deps(t, pkg) {
		for _, prefix := range driverPackages {
			if strings.HasPrefix(d, prefix) {
				found = append(found, d)
			}
		}
	}
	return found
}

// TestOnlyTheControllerLinksTheEnginesDrivers pins the engines' boundary between what every
// binary reads of an engine (its package: catalog, recipe, Pod) and how its servers are
// reached (the driver package beside it, which registers the engine's Observer): the API
// server, the kubectl plugin and the local cluster link no database driver; the controller
// links every engine's.
func TestOnlyTheControllerLinksTheEnginesDrivers(t *testing.T) {
	for _, pkg := range []string{
		"example.com/database-apiserver/cmd/apiserver",
		"example.com/database-apiserver/cmd/kubectl-database",
		"example.com/database-apiserver/internal/localcluster",
	} {
		require.Empty(t, driverDeps(t, pkg), "%s links a database driver", pkg)
	}
	linked := strings.Join(driverDeps(t, "example.com/database-apiserver/cmd/controller"), " ")
	for _, prefix := range driverPackages {
		require.Contains(t, linked, prefix)
	}
}
