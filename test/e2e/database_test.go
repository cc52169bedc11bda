//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/generated/informers/externalversions"
)

// database returns a Database manifest in namespace production.
func database(name, engine, version string, replicas int) string {
	return `apiVersion: example.com/v1
kind: Database
metadata:
  name: ` + name + `
  namespace: production
spec:
  engine: ` + engine + `
  version: "` + version + `"
  replicas: ` + strconv.Itoa(replicas) + `
  storage: 10Gi
`
}

func TestAPIResourcesListDatabasesWithShortNameDB(t *testing.T) {
	out := kubectl(t, "api-resources", "--api-group=example.com")
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "databases" {
			require.Equal(t, []string{"databases", "db", "example.com/v1", "true", "Database"}, f)
			return
		}
	}
	t.Fatalf("no databases in kubectl api-resources:\n%s", out)
}

func TestApplyExampleAndGetPrintsThePrinterColumns(t *testing.T) {
	out := kubectl(t, "apply", "-f", "artifacts/examples/")
	require.Contains(t, out, "database.example.com/my-database")

	out = kubectl(t, "get", "db", "-n", "production")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Equal(t, []string{"NAME", "ENGINE", "VERSION", "REPLICAS", "STATUS", "AGE"}, strings.Fields(lines[0]), out)
	var row []string
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "my-database" {
			row = f
		}
	}
	require.NotNil(t, row, out)
	require.Equal(t, []string{"my-database", "postgresql", "14.5", "3"}, row[:4], out)

	out = kubectl(t, "get", "db", "-A")
	require.Regexp(t, `(?m)^production\s+my-database\s+postgresql\s+14\.5\s+3\s`, out)
}

func TestExplainDescribesEngine(t *testing.T) {
	out := kubectl(t, "explain", "databases.spec.engine")
	require.Regexp(t, `GROUP:\s+example\.com`, out)
	require.Regexp(t, `KIND:\s+Database`, out)
	require.Regexp(t, `FIELD:\s+engine\s+<string>`, out)
	require.Regexp(t, `(?s)DESCRIPTION:\s+\S`, out)
}

func TestInvalidDatabaseIsRefusedWithFieldPath(t *testing.T) {
	for _, tc := range []struct {
		name, manifest string
		want           []string
	}{
		{"replicas above 10", database("e2e-bad-replicas", "postgresql", "14.5", 11), []string{"spec.replicas", "11"}},
		{"unknown engine", database("e2e-bad-engine", "oracle", "19", 1), []string{"spec.engine", `"oracle"`}},
		{"storage not in Gi", strings.Replace(database("e2e-bad-storage", "mysql", "8.0", 1), "10Gi", "10GB", 1),
			[]string{"spec.storage", "10GB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errOut := kubectlFails(t, cluster.KubeconfigPath, tc.manifest, "apply", "-f", "-")
			require.Contains(t, errOut, "is invalid")
			for _, w := range tc.want {
				require.Contains(t, errOut, w)
			}
		})
	}
}

// TestServerSideApplyWithWrongTypeIsRefusedWithFieldPath: kubectl apply --server-side of a
// wrongly typed replicas is refused as invalid, naming the field and the value as written.
func TestServerSideApplyWithWrongTypeIsRefusedWithFieldPath(t *testing.T) {
	for _, tc := range []struct{ replicas, want string }{
		{`"3"`, `spec.replicas: Invalid value: "3": must be of type integer`},
		{`3.5`, `spec.replicas: Invalid value: 3.5: must be of type integer`},
		{`99999999999`, `spec.replicas: Invalid value: 99999999999: must be an integer from -2147483648 to 2147483647`},
	} {
		t.Run(tc.replicas, func(t *testing.T) {
			manifest := strings.Replace(database("e2e-typed", "postgresql", "16", 1), "replicas: 1", "replicas: "+tc.replicas, 1)
			require.Contains(t, manifest, "replicas: "+tc.replicas)
			errOut := kubectlFails(t, cluster.KubeconfigPath, manifest, "apply", "--server-side", "-f", "-")
			require.Contains(t, errOut, `The Database "e2e-typed" is invalid`)
			require.Contains(t, errOut, tc.want)
			require.NotContains(t, errOut, "1215752191")
		})
	}
}

func TestScaleChangesSpecReplicas(t *testing.T) {
	applyExamples(t)
	out := kubectl(t, "scale", "db/my-database", "--replicas=5", "-n", "production")
	require.Contains(t, out, "scaled")
	require.Equal(t, "5", kubectl(t, "get", "db", "my-database", "-n", "production", "-o", "jsonpath={.spec.replicas}"))
	applyExamples(t) // back to the example's 3 replicas for the other tests
}

func TestPatchStatusSubresourceChangesOnlyStatus(t *testing.T) {
	kubectlIn(t, database("e2e-status", "mysql", "8.0", 1), "apply", "-f", "-")
	get := func(path string) string {
		return kubectl(t, "get", "db", "e2e-status", "-n", "production", "-o", "jsonpath={"+path+"}")
	}

	// The controller rewrites status right after each patch, so the patches' own responses
	// are what is checked, not a later read.
	out := kubectl(t, "patch", "db", "e2e-status", "-n", "production", "--subresource=status", "--type=merge",
		"-p", `{"status":{"phase":"Degraded","readyReplicas":1},"spec":{"replicas":7}}`,
		"-o", "jsonpath={.status.phase} {.spec.replicas}")
	require.Equal(t, "Degraded 1", out, "the status subresource must change status, not spec")
	require.Equal(t, "1", get(".spec.replicas"), "the status subresource must not change spec")

	out = kubectl(t, "patch", "db", "e2e-status", "-n", "production", "--type=merge",
		"-p", `{"status":{"phase":"Failed"},"spec":{"replicas":2}}`, "-o", "jsonpath={.status.phase} {.spec.replicas}")
	phase, replicas, _ := strings.Cut(out, " ")
	require.NotEqual(t, "Failed", phase, "the main resource must not change status")
	require.Equal(t, "2", replicas)
}

func TestServerSideApplyDetectsConflictsBetweenManagers(t *testing.T) {
	apply := func(manager string, replicas int, extra ...string) (string, string, error) {
		args := append([]string{"apply", "--server-side", "--field-manager=" + manager, "-f", "-"}, extra...)
		return kubectlAs(cluster.KubeconfigPath, database("e2e-ssa", "mongodb", "7.0", replicas), args...)
	}
	_, errOut, err := apply("e2e-first", 2)
	require.NoError(t, err, errOut)

	_, errOut, err = apply("e2e-second", 4)
	require.Error(t, err)
	require.Contains(t, errOut, "conflict")
	require.Contains(t, errOut, ".spec.replicas")

	_, errOut, err = apply("e2e-second", 4, "--force-conflicts")
	require.NoError(t, err, errOut)
	require.Equal(t, "4", kubectl(t, "get", "db", "e2e-ssa", "-n", "production", "-o", "jsonpath={.spec.replicas}"))
	managers := kubectl(t, "get", "db", "e2e-ssa", "-n", "production", "--show-managed-fields",
		"-o", "jsonpath={.metadata.managedFields[*].manager}")
	require.Contains(t, managers, "e2e-second")
}

func TestGetWatchSeesAnUpdate(t *testing.T) {
	kubectlIn(t, database("e2e-watch", "postgresql", "16", 1), "apply", "-f", "-")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := kubectlCmd(ctx, cluster.KubeconfigPath, "get", "db", "e2e-watch", "-n", "production", "-w",
		"--no-headers", "-o", "custom-columns=NAME:.metadata.name,REPLICAS:.spec.replicas")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := make(chan string)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "kubectl get -w ended")
			return strings.Join(strings.Fields(l), " ")
		case <-ctx.Done():
			t.Fatal("no line from kubectl get -w")
			return ""
		}
	}
	require.Equal(t, "e2e-watch 1", next())

	kubectl(t, "scale", "db/e2e-watch", "--replicas=2", "-n", "production")
	for {
		if l := next(); l == "e2e-watch 2" {
			return
		}
	}
}

func TestDeletingNamespaceWithDatabasesCompletes(t *testing.T) {
	const ns = "e2e-delete-ns"
	kubectl(t, "create", "namespace", ns)
	for _, name := range []string{"first", "second"} {
		manifest := strings.Replace(database(name, "postgresql", "15", 1), "namespace: production", "namespace: "+ns, 1)
		kubectlIn(t, manifest, "apply", "-f", "-")
	}
	kubectl(t, "delete", "namespace", ns, "--timeout=2m")

	_, errOut, err := kubectlAs(cluster.KubeconfigPath, "", "get", "namespace", ns)
	require.Error(t, err)
	require.Contains(t, errOut, "NotFound")
	list, err := clientset(t).ExampleV1().Databases(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items)
}

// TestInformerSyncsAndSeesCreate runs a generated informer through kube-apiserver: its list
// (possibly a streamed initial list, ended by the initial-events-end bookmark) and its watch.
func TestInformerSyncsAndSeesCreate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := clientset(t)
	factory := externalversions.NewSharedInformerFactoryWithOptions(cs, 0, externalversions.WithNamespace("production"))
	informer := factory.Example().V1().Databases()
	seen := make(chan string, 16)
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { seen <- obj.(*examplev1.Database).Name },
	})
	require.NoError(t, err)
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // Shutdown waits for the informers to stop
	require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced))

	replicas := int32(1)
	_, err = cs.ExampleV1().Databases("production").Create(ctx, &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-informer"},
		Spec:       examplev1.DatabaseSpec{Engine: examplev1.EngineMySQL, Version: "8.4", Replicas: &replicas, Storage: "1Gi"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	defer cs.ExampleV1().Databases("production").Delete(context.Background(), "e2e-informer", metav1.DeleteOptions{})
	for {
		select {
		case name := <-seen:
			if name == "e2e-informer" {
				return
			}
		case <-ctx.Done():
			t.Fatal("the informer did not see the new Database")
		}
	}
}
