package database

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	scalescheme "k8s.io/client-go/scale/scheme"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/pkg/apis/example"
)

// exampleDatabase is artifacts/examples/database.yaml, created three days ago and reported
// ready with 2 of its 3 replicas.
func exampleDatabase() *example.Database {
	return &example.Database{
		ObjectMeta: metav1.ObjectMeta{
			Name:              "my-database",
			Namespace:         "production",
			ResourceVersion:   "42",
			CreationTimestamp: metav1.NewTime(time.Now().Add(-72 * time.Hour)),
		},
		Spec: example.DatabaseSpec{
			Engine:   example.EnginePostgreSQL,
			Version:  "14.5",
			Replicas: ptr.To[int32](3),
			Storage:  "100Gi",
		},
		Status: example.DatabaseStatus{
			Phase:         example.DatabasePhaseDegraded,
			ReadyReplicas: 2,
			Primary:       "my-database-0",
		},
	}
}

func TestTableColumnsArePrinterColumnsThenWideOnes(t *testing.T) {
	table, err := TableConvertor{}.ConvertToTable(context.Background(), exampleDatabase(), nil)
	require.NoError(t, err)

	type column struct {
		name, typ, format string
		priority          int32
	}
	want := []column{
		{"Name", "string", "name", 0},
		{"Engine", "string", "", 0},
		{"Version", "string", "", 0},
		{"Replicas", "integer", "", 0},
		{"Status", "string", "", 0},
		{"Age", "string", "", 0},
		{"Ready", "string", "", 1},
		{"Storage", "string", "", 1},
		{"Primary", "string", "", 1},
	}
	got := make([]column, 0, len(table.ColumnDefinitions))
	for _, c := range table.ColumnDefinitions {
		got = append(got, column{c.Name, c.Type, c.Format, c.Priority})
	}
	require.Equal(t, want, got)
}

func TestTableColumnsCarryFieldDescriptions(t *testing.T) {
	wantPrefix := map[string]string{
		"Name":     "Name must be unique within a namespace.",
		"Engine":   "Engine is the database engine",
		"Version":  "Version is the engine version",
		"Replicas": "Replicas is the number of database Pods",
		"Status":   "Phase is the coarse state",
		"Age":      "CreationTimestamp is a timestamp",
		"Ready":    "Ready database Pods",
		"Storage":  "Storage is the volume size of each replica",
		"Primary":  "Primary is the Pod that is primary now",
	}
	for _, c := range columnDefinitions {
		t.Run(c.Name, func(t *testing.T) {
			require.Contains(t, wantPrefix, c.Name)
			require.Truef(t, strings.HasPrefix(c.Description, wantPrefix[c.Name]),
				"description %q does not start with %q", c.Description, wantPrefix[c.Name])
			require.NotContains(t, c.Description, "Possible enum values", "the enum listing is not a column description")
		})
	}
}

func TestTableRowOfTheExampleDatabase(t *testing.T) {
	db := exampleDatabase()
	table, err := TableConvertor{}.ConvertToTable(context.Background(), db, nil)
	require.NoError(t, err)

	require.Len(t, table.Rows, 1)
	require.Equal(t, []any{"my-database", "postgresql", "14.5", int64(3), "Degraded", "3d", "2/3", "100Gi", "my-database-0"}, table.Rows[0].Cells)
	require.Same(t, db, table.Rows[0].Object.Object)
	require.Equal(t, "42", table.ResourceVersion)
}

func TestTableRowPrintsUnsetFieldsAsNone(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*example.Database)
		column string
		want   any
	}{
		{"no replicas", func(db *example.Database) { db.Spec.Replicas = nil }, "Replicas", nil},
		{"no replicas, no ready ratio", func(db *example.Database) { db.Spec.Replicas = nil }, "Ready", nil},
		{"no phase yet", func(db *example.Database) { db.Status.Phase = "" }, "Status", nil},
		{"no storage", func(db *example.Database) { db.Spec.Storage = "" }, "Storage", nil},
		{"no creation timestamp", func(db *example.Database) { db.CreationTimestamp = metav1.Time{} }, "Age", "<unknown>"},
		{"nothing ready", func(db *example.Database) { db.Status.ReadyReplicas = 0 }, "Ready", "0/3"},
		{"no primary confirmed yet", func(db *example.Database) { db.Status.Primary = "" }, "Primary", nil},
		{"the primary as status reports it, not as spec asks", func(db *example.Database) { db.Spec.Primary = "my-database-2" }, "Primary", "my-database-0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := exampleDatabase()
			tc.mutate(db)
			table, err := TableConvertor{}.ConvertToTable(context.Background(), db, nil)
			require.NoError(t, err)
			require.Equal(t, tc.want, table.Rows[0].Cells[columnIndex(t, tc.column)])
		})
	}
}

func TestTableOfListCarriesListMetadataAndEveryItem(t *testing.T) {
	first, second := exampleDatabase(), exampleDatabase()
	second.Name = "orders"
	second.Spec.Engine = example.EngineMySQL
	list := &example.DatabaseList{
		ListMeta: metav1.ListMeta{ResourceVersion: "107", Continue: "next-page", RemainingItemCount: ptr.To[int64](5)},
		Items:    []example.Database{*first, *second},
	}

	table, err := TableConvertor{}.ConvertToTable(context.Background(), list, nil)
	require.NoError(t, err)

	require.Equal(t, "107", table.ResourceVersion)
	require.Equal(t, "next-page", table.Continue)
	require.Equal(t, ptr.To[int64](5), table.RemainingItemCount)
	require.Len(t, table.Rows, 2)
	for i := range list.Items {
		require.Same(t, &list.Items[i], table.Rows[i].Object.Object)
	}
	require.Equal(t, "orders", table.Rows[1].Cells[0])
	require.Equal(t, "mysql", table.Rows[1].Cells[1])
}

func TestTableOfEmptyListHasColumnsAndNoRows(t *testing.T) {
	table, err := TableConvertor{}.ConvertToTable(context.Background(), &example.DatabaseList{}, nil)
	require.NoError(t, err)
	require.NotNil(t, table.Rows)
	require.Empty(t, table.Rows)
	require.Len(t, table.ColumnDefinitions, 9)
}

func TestTableNoHeadersOmitsColumnDefinitions(t *testing.T) {
	tests := []struct {
		name        string
		options     runtime.Object
		wantColumns bool
	}{
		{"no options", nil, true},
		{"headers", &metav1.TableOptions{}, true},
		{"no headers", &metav1.TableOptions{NoHeaders: true}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			table, err := TableConvertor{}.ConvertToTable(context.Background(), exampleDatabase(), tc.options)
			require.NoError(t, err)
			require.Equal(t, tc.wantColumns, len(table.ColumnDefinitions) > 0)
			require.Len(t, table.Rows, 1, "rows are printed either way")
		})
	}
}

func TestTableOfScaleUsesGenericColumns(t *testing.T) {
	scale := &scalescheme.Scale{ObjectMeta: metav1.ObjectMeta{Name: "my-database", CreationTimestamp: metav1.Now()}}
	table, err := TableConvertor{}.ConvertToTable(context.Background(), scale, nil)
	require.NoError(t, err)
	require.Len(t, table.ColumnDefinitions, 2)
	require.Equal(t, "Name", table.ColumnDefinitions[0].Name)
	require.Equal(t, "my-database", table.Rows[0].Cells[0])
}

func columnIndex(t *testing.T, name string) int {
	t.Helper()
	for i, c := range columnDefinitions {
		if c.Name == name {
			return i
		}
	}
	t.Fatalf("no column %q", name)
	return -1
}
