package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
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
