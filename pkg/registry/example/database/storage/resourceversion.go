package storage

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	apistorage "k8s.io/apiserver/pkg/storage"
)

// resourceVersionChecked is the store's storage.Interface with the resourceVersion of a
// get and a watch parsed before the request reaches the watch cache or etcd: a
// resourceVersion that is not a decimal revision ("abc", "-1") is a 400 BadRequest saying
// "invalid resource version", the answer a list gets (storage.Interface's list path),
// instead of the parse error the cache returns as is, which the generic registry reports as
// a 500. "" and "0" are valid, as everywhere in the API.
type resourceVersionChecked struct {
	apistorage.Interface
}

// checkResourceVersion is BadRequest for a resourceVersion the API's versioner cannot parse.
func checkResourceVersion(rv string) error {
	if _, err := (apistorage.APIObjectVersioner{}).ParseResourceVersion(rv); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
	}
	return nil
}

// Get is the wrapped Get, after checkResourceVersion of opts.ResourceVersion.
func (s resourceVersionChecked) Get(ctx context.Context, key string, opts apistorage.GetOptions, out runtime.Object) error {
	if err := checkResourceVersion(opts.ResourceVersion); err != nil {
		return err
	}
	return s.Interface.Get(ctx, key, opts, out)
}

// Watch is the wrapped Watch, after checkResourceVersion of opts.ResourceVersion.
func (s resourceVersionChecked) Watch(ctx context.Context, key string, opts apistorage.ListOptions) (watch.Interface, error) {
	if err := checkResourceVersion(opts.ResourceVersion); err != nil {
		return nil, err
	}
	return s.Interface.Watch(ctx, key, opts)
}
