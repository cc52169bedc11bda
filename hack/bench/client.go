package main

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

const (
	contentJSON     = "application/json"
	contentProtobuf = "application/vnd.kubernetes.protobuf"
)

// crdGroupVersion is the group of the CRD the benchmark compares against: example.com is ours.
var crdGroupVersion = schema.GroupVersion{Group: "crd.example.com", Version: "v1"}

// scheme knows the same Go types, examplev1.Database and DatabaseList, in both groups: every
// target is driven by identical client code, so the client's own cost is the same for all
// (only the wire format differs where a target speaks protobuf).
var (
	scheme         = runtime.NewScheme()
	codecs         = serializer.NewCodecFactory(scheme)
	parameterCodec = runtime.NewParameterCodec(scheme)
)

func init() {
	for _, gv := range []schema.GroupVersion{examplev1.SchemeGroupVersion, crdGroupVersion} {
		scheme.AddKnownTypes(gv, &examplev1.Database{}, &examplev1.DatabaseList{})
		metav1.AddToGroupVersion(scheme, gv)
	}
}

// dbClient is a minimal typed client for databases of one group, on one REST client.
type dbClient struct {
	rc rest.Interface
}

// newDBClient returns a client for gv's databases at base's host, speaking contentType
// (requests and responses), without client-side rate limiting.
func newDBClient(base *rest.Config, gv schema.GroupVersion, contentType string) (*dbClient, error) {
	cfg := rest.CopyConfig(base)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = codecs.WithoutConversion()
	cfg.ContentType = contentType
	cfg.AcceptContentTypes = contentType
	cfg.QPS = -1 // no client-side rate limiter
	cfg.Burst = 0
	cfg.WarningHandler = rest.NoWarnings{}
	cfg.UserAgent = "database-bench"
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &dbClient{rc: rc}, nil
}

func (c *dbClient) Create(ctx context.Context, ns string, db *examplev1.Database) (*examplev1.Database, error) {
	out := &examplev1.Database{}
	err := c.rc.Post().Namespace(ns).Resource("databases").Body(db).Do(ctx).Into(out)
	return out, err
}

func (c *dbClient) Get(ctx context.Context, ns, name string) (*examplev1.Database, error) {
	out := &examplev1.Database{}
	err := c.rc.Get().Namespace(ns).Resource("databases").Name(name).Do(ctx).Into(out)
	return out, err
}

func (c *dbClient) List(ctx context.Context, ns string, opts metav1.ListOptions) (*examplev1.DatabaseList, error) {
	out := &examplev1.DatabaseList{}
	err := c.rc.Get().Namespace(ns).Resource("databases").VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

func (c *dbClient) Update(ctx context.Context, db *examplev1.Database) (*examplev1.Database, error) {
	out := &examplev1.Database{}
	err := c.rc.Put().Namespace(db.Namespace).Resource("databases").Name(db.Name).Body(db).Do(ctx).Into(out)
	return out, err
}

func (c *dbClient) UpdateStatus(ctx context.Context, db *examplev1.Database) (*examplev1.Database, error) {
	out := &examplev1.Database{}
	err := c.rc.Put().Namespace(db.Namespace).Resource("databases").Name(db.Name).SubResource("status").
		Body(db).Do(ctx).Into(out)
	return out, err
}

func (c *dbClient) MergePatch(ctx context.Context, ns, name string, patch []byte) (*examplev1.Database, error) {
	out := &examplev1.Database{}
	err := c.rc.Patch(types.MergePatchType).Namespace(ns).Resource("databases").Name(name).
		Body(patch).Do(ctx).Into(out)
	return out, err
}

func (c *dbClient) Delete(ctx context.Context, ns, name string) error {
	return c.rc.Delete().Namespace(ns).Resource("databases").Name(name).Do(ctx).Error()
}

// DeleteCollection deletes every Database of ns (the server deletes them one by one).
func (c *dbClient) DeleteCollection(ctx context.Context, ns string) error {
	return c.rc.Delete().Namespace(ns).Resource("databases").Do(ctx).Error()
}

func (c *dbClient) Watch(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.rc.Get().Namespace(ns).Resource("databases").VersionedParams(&opts, parameterCodec).Watch(ctx)
}
