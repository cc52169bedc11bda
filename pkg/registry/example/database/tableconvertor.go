package database

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/generated/openapi"
)

// TableConvertor prints Databases as the server-side table of
// `kubectl get databases`: the columns a Database CRD would declare as
// additionalPrinterColumns (Name, Engine, Version, Replicas, Status, Age) at
// priority 0, and Ready, Storage and Primary (status.primary) at priority 1
// (`-o wide`). A cell whose
// field is not set is nil, which kubectl prints as <none>, as it does for a
// CRD's columns.
type TableConvertor struct{}

var _ rest.TableConvertor = TableConvertor{}

// columnDefinitions are the table columns, in the order of the row cells.
// Descriptions come from the field docs, through the generated OpenAPI.
var columnDefinitions = func() []metav1.TableColumnDefinition {
	objectMeta := metav1.ObjectMeta{}.SwaggerDoc()
	definitions := openapi.GetOpenAPIDefinitions(func(path string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + path)
	})
	specDoc := propertyDescriptions(definitions, examplev1.DatabaseSpec{}.OpenAPIModelName())
	statusDoc := propertyDescriptions(definitions, examplev1.DatabaseStatus{}.OpenAPIModelName())
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: objectMeta["name"]},
		{Name: "Engine", Type: "string", Description: specDoc("engine")},
		{Name: "Version", Type: "string", Description: specDoc("version")},
		{Name: "Replicas", Type: "integer", Description: specDoc("replicas")},
		{Name: "Status", Type: "string", Description: statusDoc("phase")},
		{Name: "Age", Type: "string", Description: objectMeta["creationTimestamp"]},
		{Name: "Ready", Type: "string", Priority: 1, Description: "Ready database Pods out of the desired ones: status.readyReplicas/spec.replicas."},
		{Name: "Storage", Type: "string", Priority: 1, Description: specDoc("storage")},
		{Name: "Primary", Type: "string", Priority: 1, Description: statusDoc("primary")},
	}
}()

// propertyDescriptions returns a lookup of the property descriptions of the
// OpenAPI model named model: the first paragraph only, without the enum
// listing openapi-gen appends. A missing model or property reads as "".
func propertyDescriptions(definitions map[string]common.OpenAPIDefinition, model string) func(property string) string {
	properties := definitions[model].Schema.Properties
	return func(property string) string {
		description, _, _ := strings.Cut(properties[property].Description, "\n\n")
		return description
	}
}

// ConvertToTable returns the table of object, a *example.Database (one row)
// or a *example.DatabaseList (one row per item, with the list's
// resourceVersion, continue token and remaining item count). Each row's
// Object is the Database itself. With tableOptions *metav1.TableOptions and
// NoHeaders set, the column definitions are left out. Any other object (the
// Scale of databases/scale) gets the generic Name / Created At table.
func (c TableConvertor) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	switch obj := object.(type) {
	case *example.Database:
		table.ResourceVersion = obj.ResourceVersion
		table.Rows = []metav1.TableRow{databaseRow(obj)}
	case *example.DatabaseList:
		table.ResourceVersion = obj.ResourceVersion
		table.Continue = obj.Continue
		table.RemainingItemCount = obj.RemainingItemCount
		table.Rows = make([]metav1.TableRow, 0, len(obj.Items))
		for i := range obj.Items {
			table.Rows = append(table.Rows, databaseRow(&obj.Items[i]))
		}
	default:
		return rest.NewDefaultTableConvertor(example.Resource("databases")).ConvertToTable(ctx, object, tableOptions)
	}
	if opts, ok := tableOptions.(*metav1.TableOptions); !ok || !opts.NoHeaders {
		table.ColumnDefinitions = columnDefinitions
	}
	return table, nil
}

// databaseRow returns the cells of db in the order of columnDefinitions.
func databaseRow(db *example.Database) metav1.TableRow {
	var replicas, ready any
	if db.Spec.Replicas != nil {
		replicas = int64(*db.Spec.Replicas)
		ready = fmt.Sprintf("%d/%d", db.Status.ReadyReplicas, *db.Spec.Replicas)
	}
	return metav1.TableRow{
		Cells: []any{
			db.Name,
			stringOrNil(string(db.Spec.Engine)),
			stringOrNil(db.Spec.Version),
			replicas,
			stringOrNil(string(db.Status.Phase)),
			age(db.CreationTimestamp),
			ready,
			stringOrNil(db.Spec.Storage),
			stringOrNil(db.Status.Primary),
		},
		Object: runtime.RawExtension{Object: db},
	}
}

// stringOrNil returns s, or nil when s is empty so kubectl prints <none>.
func stringOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// age returns the time since timestamp the way kubectl prints it ("5m",
// "3d"), or "<unknown>" when timestamp is zero.
func age(timestamp metav1.Time) string {
	if timestamp.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(timestamp.Time))
}
