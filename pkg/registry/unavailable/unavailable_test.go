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
// instead of waiting for the request's own timeout: the request's context has
// no deadline here, so only the health check can end the call.
func TestEtcdLostDuringACallTimesOutWithRetryAfter(t *testing.T) {
	var checks atomic.Int32
	healthy := func() error {
		if checks.Add(1) == 1 {
			return nil
		}
		return errors.New("etcd: context deadline exceeded")
	}
	s := NewStorage(&fakeStorage{block: true}, databases, healthy)
	started := time.Now()
	err := createWithin(t, s, context.Background())
	t.Logf("cancelled %v after the call started (health checked every %v)", time.Since(started), healthCheckInterval)
	require.True(t, apierrors.IsTimeout(err), "%v", err)
	seconds, ok := apierrors.SuggestsClientDelay(err)
	require.True(t, ok)
	require.Equal(t, RetryAfterSeconds, seconds)
	require.Contains(t, err.Error(), "may or may not have been applied")
	require.EqualValues(t, 2, checks.Load(), "one check before the call, one failed check during it")
}

// A call that ends by itself is not cancelled, and a cancellation that is
// not the health check's is returned as is: the caller cancels the call
// once the health check has passed during it.
func TestHealthyCallIsNotCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var checks atomic.Int32
	s := NewStorage(&fakeStorage{block: true}, databases, func() error {
		if checks.Add(1) == 2 { // the first check during the call
			cancel()
		}
		return nil
	})
	require.ErrorIs(t, createWithin(t, s, ctx), context.Canceled)
}

// createWithin returns what s.Create returns, and fails the test if it has not returned
// within a minute (a give-up bound, far beyond the health check's interval).
func createWithin(t *testing.T, s storage.Interface, ctx context.Context) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Create(ctx, "k", nil, nil, 0) }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("Create did not return within a minute")
		return nil
	}
}
