// Package unavailable decorates the storage of a resource so that an
// unreachable etcd is answered with a 503 ServiceUnavailable and Retry-After,
// which clients retry, instead of a 500 with the gRPC error ("rpc error: code =
// Unavailable desc = error reading from server: EOF") or a request that hangs
// until it times out. An etcd out of space (its NOSPACE alarm raised) is
// answered with a 503 that says so, without Retry-After: only an operator
// brings it back.
package unavailable

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
)

// RetryAfterSeconds is the Retry-After of the 503 answered while etcd is
// unreachable.
const RetryAfterSeconds = 1

// RESTOptionsGetter returns getter whose storage, for every resource, is
// decorated by NewStorage, with etcd's health probed by k8s.io/apiserver's
// etcd health check (the one /readyz/etcd runs: a read with a 2s timeout, at
// most one every second, its last result reused in between) on a client of
// its own, closed with the storage.
func RESTOptionsGetter(getter generic.RESTOptionsGetter) generic.RESTOptionsGetter {
	return restOptionsGetter{getter}
}

type restOptionsGetter struct {
	generic.RESTOptionsGetter
}

func (g restOptionsGetter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	decorate := opts.Decorator
	if decorate == nil {
		decorate = generic.UndecoratedStorage
	}
	opts.Decorator = func(config *storagebackend.ConfigForResource, resourcePrefix string,
		keyFunc func(obj runtime.Object) (string, error), newFunc, newListFunc func() runtime.Object,
		getAttrsFunc storage.AttrFunc, trigger storage.IndexerFuncs, indexers *cache.Indexers,
	) (storage.Interface, factory.DestroyFunc, error) {
		s, destroy, err := decorate(config, resourcePrefix, keyFunc, newFunc, newListFunc, getAttrsFunc, trigger, indexers)
		if err != nil {
			return nil, nil, err
		}
		stop := make(chan struct{})
		healthy, err := factory.CreateHealthCheck(config.Config, stop)
		if err != nil {
			destroy()
			return nil, nil, fmt.Errorf("etcd health check for %s: %w", config.GroupResource, err)
		}
		var once sync.Once
		return NewStorage(s, config.GroupResource, healthy), func() {
			once.Do(func() { close(stop) })
			destroy()
		}, nil
	}
	return opts, nil
}

// NewStorage returns s with its errors from an unreachable etcd turned into a
// 503 ServiceUnavailable with Retry-After RetryAfterSeconds: gRPC Unavailable
// (etcd stopped, its connection lost mid-request, no leader). Writes, and reads
// that must reach etcd (an empty resourceVersion: the latest state), fail
// fast with the same 503 while healthy reports an error, and are cancelled
// with a 504 Timeout and Retry-After when it starts failing while they run,
// instead of waiting for the request's timeout while etcd's client retries.
// Reads the watch cache can serve and watches are passed through.
func NewStorage(s storage.Interface, resource schema.GroupResource, healthy func() error) storage.Interface {
	return &unavailableStorage{Interface: s, resource: resource, healthy: healthy}
}

type unavailableStorage struct {
	storage.Interface
	resource schema.GroupResource
	healthy  func() error
}

// healthCheckInterval is how often a storage call in progress asks whether
// etcd is still healthy; the health check probes at most that often anyway.
const healthCheckInterval = time.Second

// errEtcdUnhealthy is the cause of the cancellation of a call during which the
// health check started failing.
type errEtcdUnhealthy struct{ err error }

func (e errEtcdUnhealthy) Error() string { return e.err.Error() }

// guard runs call unless the health check fails, then returns the 503, and
// interprets its error. While call runs, the health check is asked every
// healthCheckInterval; when it fails, call is cancelled (etcd's client would
// retry until the request times out) and guard returns a 504 Timeout with
// Retry-After, since what was sent may or may not have been applied.
func (s *unavailableStorage) guard(ctx context.Context, call func(context.Context) error) error {
	if err := s.healthy(); err != nil {
		return s.serviceUnavailable(err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	defer close(done)
	go func() {
		ticker := time.NewTicker(healthCheckInterval)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
				if err := s.healthy(); err != nil {
					cancel(errEtcdUnhealthy{err})
					return
				}
			}
		}
	}()
	err := call(ctx)
	var unhealthy errEtcdUnhealthy
	if err != nil && errors.As(context.Cause(ctx), &unhealthy) {
		timeout := apierrors.NewTimeoutError(fmt.Sprintf(
			"the storage of %s became unavailable during the request, which may or may not have been applied: %v",
			s.resource, unhealthy.err), RetryAfterSeconds)
		return timeout
	}
	if err != nil && IsUnavailable(err) {
		return s.serviceUnavailable(err)
	}
	if err != nil && IsNoSpace(err) {
		return s.outOfSpace(err)
	}
	return err
}

// outOfSpace is the answer to a write etcd refused for its NOSPACE alarm: a
// 503 ServiceUnavailable, the code the Kubernetes API conventions give a
// server temporarily unable to handle a request (they use no 507, and
// apimachinery has no reason for one, so clients would see "Unknown"). It has
// no Retry-After, so that clients do not retry a write that fails until an
// operator frees space; reads keep working meanwhile.
func (s *unavailableStorage) outOfSpace(err error) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusServiceUnavailable,
		Reason: metav1.StatusReasonServiceUnavailable,
		Message: fmt.Sprintf("the storage of %s is out of space and refuses writes (%v); reads still work; "+
			"writes resume once etcd is compacted and defragmented and its NOSPACE alarm disarmed", s.resource, err),
		Details: &metav1.StatusDetails{Group: s.resource.Group, Kind: s.resource.Resource},
	}}
}

func (s *unavailableStorage) serviceUnavailable(err error) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusServiceUnavailable,
		Reason:  metav1.StatusReasonServiceUnavailable,
		Message: fmt.Sprintf("the storage of %s is unavailable, retry later: %v", s.resource, err),
		Details: &metav1.StatusDetails{
			Group:             s.resource.Group,
			Kind:              s.resource.Resource,
			RetryAfterSeconds: RetryAfterSeconds,
		},
	}}
}

func (s *unavailableStorage) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	return s.guard(ctx, func(ctx context.Context) error {
		return s.Interface.Create(ctx, key, obj, out, ttl)
	})
}

func (s *unavailableStorage) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	return s.guard(ctx, func(ctx context.Context) error {
		return s.Interface.Delete(ctx, key, out, preconditions, validateDeletion, cachedExistingObject, opts)
	})
}

func (s *unavailableStorage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	return s.guard(ctx, func(ctx context.Context) error {
		return s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, cachedExistingObject)
	})
}

func (s *unavailableStorage) Get(ctx context.Context, key string, opts storage.GetOptions, objPtr runtime.Object) error {
	if opts.ResourceVersion != "" { // the watch cache may answer
		return s.interpret(s.Interface.Get(ctx, key, opts, objPtr))
	}
	return s.guard(ctx, func(ctx context.Context) error {
		return s.Interface.Get(ctx, key, opts, objPtr)
	})
}

func (s *unavailableStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if opts.ResourceVersion != "" { // the watch cache may answer
		return s.interpret(s.Interface.GetList(ctx, key, opts, listObj))
	}
	return s.guard(ctx, func(ctx context.Context) error {
		return s.Interface.GetList(ctx, key, opts, listObj)
	})
}

// interpret returns err as the 503 when it says etcd is unreachable, else as is.
func (s *unavailableStorage) interpret(err error) error {
	if err != nil && IsUnavailable(err) {
		return s.serviceUnavailable(err)
	}
	return err
}

// IsUnavailable reports whether err says etcd cannot be reached: a gRPC
// Unavailable status, as etcd's client returns it, or one of etcd's own errors
// with that code (no leader, request timed out from a lost connection).
func IsUnavailable(err error) bool {
	var etcdErr rpctypes.EtcdError
	if errors.As(err, &etcdErr) {
		return etcdErr.Code() == codes.Unavailable
	}
	if st, ok := status.FromError(err); ok {
		return st.Code() == codes.Unavailable
	}
	return false
}

// IsNoSpace reports whether err is etcd's refusal of a write while its
// NOSPACE alarm is raised ("etcdserver: mvcc: database space exceeded"), as
// etcd's client returns it or as the gRPC status it decodes.
func IsNoSpace(err error) bool {
	if errors.Is(err, rpctypes.ErrNoSpace) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.ResourceExhausted && st.Message() == rpctypes.ErrorDesc(rpctypes.ErrGRPCNoSpace)
}
