package unavailable

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage"
)

// fakeStorage answers every call with err and counts the calls; with block,
// Create waits for its context to end, as etcd's client retrying an etcd
// that went away does.
type fakeStorage struct {
	storage.Interface
	err   error
	block bool
	calls int
}

func (f *fakeStorage) Create(ctx context.Context, _ string, _, _ runtime.Object, _ uint64) error {
	f.calls++
	if f.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return f.err
}

func (f *fakeStorage) Get(context.Context, string, storage.GetOptions, runtime.Object) error {
	f.calls++
	return f.err
}

var databases = schema.GroupResource{Group: "example.com", Resource: "databases"}

func requireServiceUnavailable(t *testing.T, err error) {
	t.Helper()
	require.True(t, apierrors.IsServiceUnavailable(err), "%v", err)
	seconds, ok := apierrors.SuggestsClientDelay(err)
	require.True(t, ok)
	require.Equal(t, RetryAfterSeconds, seconds)
	require.Contains(t, err.Error(), "the storage of databases.example.com is unavailable, retry later")
}

// An etcd connection lost mid-request (gRPC Unavailable) and etcd's own
// unavailable errors are a 503 with Retry-After; other errors are unchanged.
func TestUnreachableEtcdIsServiceUnavailable(t *testing.T) {
	healthy := func() error { return nil }
	for _, err := range []error{
		status.Error(codes.Unavailable, "error reading from server: EOF"),
		fmt.Errorf("wrapped: %w", status.Error(codes.Unavailable, "connection refused")),
		rpctypes.Error(rpctypes.ErrGRPCNoLeader),
		rpctypes.ErrTimeoutDueToConnectionLost,
	} {
		s := NewStorage(&fakeStorage{err: err}, databases, healthy)
		requireServiceUnavailable(t, s.Create(context.Background(), "k", nil, nil, 0))
	}
	for _, err := range []error{
		nil,
		storage.NewKeyExistsError("k", 1),
		status.Error(codes.InvalidArgument, "bad"),
		rpctypes.ErrCompacted,
		context.DeadlineExceeded,
		errors.New("other"),
	} {
		s := NewStorage(&fakeStorage{err: err}, databases, healthy)
		require.Equal(t, err, s.Create(context.Background(), "k", nil, nil, 0))
	}
}

// A write etcd refuses for its NOSPACE alarm is a 503 that says the store is
// out of space, without Retry-After (a retry fails until an operator frees
// space); etcd's other ResourceExhausted errors are unchanged.
func TestEtcdOutOfSpaceIsServiceUnavailableWithoutRetry(t *testing.T) {
	healthy := func() error { return nil }
	for _, err := range []error{
		rpctypes.Error(rpctypes.ErrGRPCNoSpace),
		rpctypes.ErrGRPCNoSpace,
		fmt.Errorf("wrapped: %w", rpctypes.ErrNoSpace),
	} {
		s := NewStorage(&fakeStorage{err: err}, databases, healthy)
		got := s.Create(context.Background(), "k", nil, nil, 0)
		require.True(t, apierrors.IsServiceUnavailable(got), "%v: %v", err, got)
		_, retry := apierrors.SuggestsClientDelay(got)
		require.False(t, retry, "%v", got)
		require.Contains(t, got.Error(), "the storage of databases.example.com is out of space and refuses writes")
		require.Contains(t, got.Error(), "mvcc: database space exceeded")
	}
	tooMany := rpctypes.Error(rpctypes.ErrGRPCRequestTooManyRequests)
	s := NewStorage(&fakeStorage{err: tooMany}, databases, healthy)
	require.Equal(t, tooMany, s.Create(context.Background(), "k", nil, nil, 0))
}

// While the health check fails, writes and reads of the latest state fail
// fast without reaching etcd; reads the watch cache can serve go through.
func TestUnhealthyEtcdFailsFast(t *testing.T) {
	inner := &fakeStorage{}
	s := NewStorage(inner, databases, func() error { return errors.New("etcd: context deadline exceeded") })
	requireServiceUnavailable(t, s.Create(context.Background(), "k", nil, nil, 0))
	requireServiceUnavailable(t, s.Get(context.Background(), "k", storage.GetOptions{}, nil))
	require.Zero(t, inner.calls)
	require.NoError(t, s.Get(context.Background(), "k", storage.GetOptions{ResourceVersion: "0"}, nil))
	require.Equal(t, 1, inner.calls)
}

// A call that started while etcd was healthy is cancelled once the health
// check fails, with a 504 Timeout and Retry-After (it may have been applied),
// instead of waiting for the request's own timeout.
func TestEtcdLostDuringACallTimesOutWithRetryAfter(t *testing.T) {
	var checks atomic.Int32
	healthy := func() error {
		if checks.Add(1) == 1 {
			return nil
		}
		return errors.New("etcd: context deadline exceeded")
	}
	s := NewStorage(&fakeStorage{block: true}, databases, healthy)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started := time.Now()
	err := s.Create(ctx, "k", nil, nil, 0)
	require.Less(t, time.Since(started), 3*healthCheckInterval)
	require.True(t, apierrors.IsTimeout(err), "%v", err)
	seconds, ok := apierrors.SuggestsClientDelay(err)
	require.True(t, ok)
	require.Equal(t, RetryAfterSeconds, seconds)
	require.Contains(t, err.Error(), "may or may not have been applied")
}

// A call that ends by itself is not cancelled, and a cancellation that is
// not the health check's is returned as is.
func TestHealthyCallIsNotCancelled(t *testing.T) {
	s := NewStorage(&fakeStorage{block: true}, databases, func() error { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.Create(ctx, "k", nil, nil, 0), context.DeadlineExceeded)
}
