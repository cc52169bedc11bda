package databasebackup

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"example.com/database-apiserver/pkg/apis/example"
)

// columns are the table of `kubectl get databasebackups`: priority 0 the name, Database,
// when it ended, the range of times it restores, its size and age; priority 1 (-o wide) its
// method, start, size in the store and log files.
var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "<database>.<backup id>."},
	{Name: "Database", Type: "string", Description: "The Database the backup was taken of."},
	{Name: "End", Type: "string", Format: "date-time", Description: "When the backup ended: the data is as of then."},
	{Name: "Recoverable From", Type: "string", Format: "date-time", Description: "The first time a restore from this backup reaches."},
	{Name: "Recoverable Until", Type: "string", Format: "date-time", Description: "The last time a restore starts from this backup; <none> when not known."},
	{Name: "Size", Type: "string", Description: "The size of the data it restores."},
	{Name: "Age", Type: "string", Description: "Time since the backup ended."},
	{Name: "Method", Type: "string", Priority: 1, Description: "How the backup was taken."},
	{Name: "Start", Type: "string", Format: "date-time", Priority: 1, Description: "When the backup started."},
	{Name: "Stored", Type: "string", Priority: 1, Description: "What the backup takes in the store."},
	{Name: "Log Start", Type: "string", Priority: 1, Description: "The first archived log file the backup needs."},
	{Name: "Log End", Type: "string", Priority: 1, Description: "The last archived log file the backup needs."},
}

// convertToTable prints a DatabaseBackup or a DatabaseBackupList, as of now; without
// headers when tableOptions asks for none.
func convertToTable(object, tableOptions runtime.Object, now time.Time) (*metav1.Table, error) {
	table := &metav1.Table{}
	switch obj := object.(type) {
	case *example.DatabaseBackup:
		table.Rows = []metav1.TableRow{row(obj, now)}
	case *example.DatabaseBackupList:
		for i := range obj.Items {
			table.Rows = append(table.Rows, row(&obj.Items[i], now))
		}
	default:
		return nil, fmt.Errorf("a table of databasebackups needs a DatabaseBackup or a DatabaseBackupList, not %T", object)
	}
	if opts, ok := tableOptions.(*metav1.TableOptions); !ok || !opts.NoHeaders {
		table.ColumnDefinitions = columns
	}
	if m, err := meta.ListAccessor(object); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	return table, nil
}

func row(b *example.DatabaseBackup, now time.Time) metav1.TableRow {
	var until any
	if b.RecoverableUntil != nil {
		until = timestamp(*b.RecoverableUntil)
	}
	var logStart, logEnd any
	if b.LogStart != "" {
		logStart, logEnd = b.LogStart, b.LogEnd
	}
	return metav1.TableRow{
		Object: runtime.RawExtension{Object: b},
		Cells: []any{
			b.Name, b.Database, timestamp(b.EndTime), timestamp(b.RecoverableFrom), until,
			bytes(b.DataBytes), duration.HumanDuration(now.Sub(b.EndTime.Time)),
			b.Method, timestamp(b.StartTime), bytes(b.StoredBytes), logStart, logEnd,
		},
	}
}

func timestamp(t metav1.Time) string { return t.UTC().Format(time.RFC3339) }

// bytes prints n bytes in the largest binary unit that leaves at least 1, with one decimal
// below 10 ("1.5Gi", "20Mi", "512").
func bytes(n int64) string {
	units := []string{"Ki", "Mi", "Gi", "Ti", "Pi"}
	v, unit := float64(n), ""
	for _, u := range units {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	if unit != "" && v < 10 {
		return fmt.Sprintf("%.1f%s", v, unit)
	}
	return fmt.Sprintf("%.0f%s", v, unit)
}
