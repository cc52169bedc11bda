package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/registry/example/database/storage"
)

func TestDoNotTerminateRefusesDeleteUntilThePolicyChanges(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "precious", examplev1.EnginePostgreSQL, "17")
	db.Spec.DeletionPolicy = examplev1.DeletionPolicyDoNotTerminate
	db = create(t, client, db)

	err := dbs.Delete(ctx, "precious", metav1.DeleteOptions{})
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	require.ErrorContains(t, err, "spec.deletionPolicy is DoNotTerminate")
	_, err = dbs.Get(ctx, "precious", metav1.GetOptions{})
	require.NoError(t, err, "the Database must still exist")

	db.Spec.DeletionPolicy = examplev1.DeletionPolicyRetain
	_, err = dbs.Update(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, dbs.Delete(ctx, "precious", metav1.DeleteOptions{}))
	_, err = dbs.Get(ctx, "precious", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "got %v", err)
}

// A protected Database does not stop a delete collection (what a namespace
// deletion sends): the others are deleted whatever their place in the list,
// and the 403 names the protected ones.
func TestDeleteCollectionSparesDoNotTerminateDatabases(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	for _, name := range []string{"a-protected", "b-disposable", "c-protected", "d-disposable"} {
		db := newDatabase(ns, name, examplev1.EngineMySQL, "8.4")
		if strings.HasSuffix(name, "-protected") {
			db.Spec.DeletionPolicy = examplev1.DeletionPolicyDoNotTerminate
		}
		create(t, client, db)
	}

	err := dbs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	require.ErrorContains(t, err, "a-protected, c-protected")

	list, err := dbs.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var left []string
	for _, db := range list.Items {
		left = append(left, db.Name)
	}
	require.Equal(t, []string{"a-protected", "c-protected"}, left)
}

// A delete collection larger than a page lists it page by page, as the generic
// store does, and spares the protected Databases of every page: here one on
// each of three pages and one more on the first, named together in one 403.
func TestDeleteCollectionPagesThroughTheListAndSparesProtectedOnEveryPage(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)

	const count = 2*storage.DeleteCollectionPageSize + 1 // three pages
	name := func(i int) string { return fmt.Sprintf("db-%04d", i) }
	protected := []string{name(0), name(250), name(storage.DeleteCollectionPageSize), name(count - 1)}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range count {
		g.Go(func() error {
			db := newDatabase(ns, name(i), examplev1.EngineMySQL, "8.4")
			if slices.Contains(protected, db.Name) {
				db.Spec.DeletionPolicy = examplev1.DeletionPolicyDoNotTerminate
			}
			_, err := dbs.Create(gctx, db, metav1.CreateOptions{})
			return err
		})
	}
	require.NoError(t, g.Wait())

	listsBefore := storageLists(t)
	err := dbs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	require.ErrorContains(t, err, strings.Join(protected, ", "))
	require.GreaterOrEqual(t, storageLists(t)-listsBefore, 3.0, "one storage list for each page")

	list, err := dbs.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var left []string
	for _, db := range list.Items {
		left = append(left, db.Name)
	}
	require.Equal(t, protected, left)
}

// storageLists is the server's count of LISTs of databases served by its
// storage (etcd or the watch cache): apiserver_storage_list_total summed over
// its storage and index labels.
func storageLists(t *testing.T) float64 {
	t.Helper()
	resp := do(t, http.MethodGet, "/metrics", nil, nil)
	require.Equal(t, http.StatusOK, resp.code)
	total := 0.0
	for line := range strings.SplitSeq(string(resp.body), "\n") {
		rest, isList := strings.CutPrefix(line, "apiserver_storage_list_total{")
		labels, value, ok := strings.Cut(rest, "} ")
		if !isList || !ok || !strings.Contains(labels, `group="example.com"`) || !strings.Contains(labels, `resource="databases"`) {
			continue
		}
		n, err := strconv.ParseFloat(value, 64)
		require.NoError(t, err, line)
		total += n
	}
	return total // 0 before the first LIST of databases
}
