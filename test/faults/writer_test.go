//go:build faults

package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/generated/clientset/versioned"
)

// writeInterval is the writer's pace: 20 creates a second.
const writeInterval = 50 * time.Millisecond

// giveUpAfter is how long the writer retries one create before it counts it failed.
const giveUpAfter = time.Minute

// writer creates Databases named db-00000, db-00001... in one namespace at
// writeInterval, one at a time, each until it is acknowledged: client-go
// retries 5xx answers with Retry-After itself; the writer retries any other
// error (a connection refused or reset by a killed server) on the next
// client, as clients behind a Service reach another server. Names are unique,
// so an AlreadyExists answer means an earlier attempt was stored.
type writer struct {
	clients []versioned.Interface
	ns      string

	mu sync.Mutex
	// acked are the names whose create was answered 201, or 409 AlreadyExists after an
	// attempt that failed.
	acked []string
	// errors counts the attempts that failed (client-go's error after its own retries)
	// and were retried; failed the creates given up after giveUpAfter; forbidden the 403s.
	errors, failed, forbidden, alreadyExists int
	// maxPause is the longest time between two acknowledged creates.
	maxPause time.Duration
}

// run writes until ctx is done.
func (w *writer) run(ctx context.Context) {
	ticker := time.NewTicker(writeInterval)
	defer ticker.Stop()
	last := time.Now()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if w.create(ctx, i) {
			w.mu.Lock()
			w.maxPause = max(w.maxPause, time.Since(last))
			w.mu.Unlock()
			last = time.Now()
		}
	}
}

// create creates db-i, first through clients[i%len(clients)], and says whether it was acknowledged.
func (w *writer) create(ctx context.Context, i int) bool {
	name := fmt.Sprintf("db-%05d", i)
	db := &examplev1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: examplev1.DatabaseSpec{Engine: examplev1.EnginePostgreSQL, Version: "16", Replicas: ptr.To[int32](1), Storage: "1Gi"}}
	deadline := time.Now().Add(giveUpAfter)
	for attempt := 0; ; attempt++ {
		client := w.clients[(i+attempt)%len(w.clients)]
		callCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := client.ExampleV1().Databases(w.ns).Create(callCtx, db, metav1.CreateOptions{})
		cancel()
		w.mu.Lock()
		switch {
		case err == nil:
			w.acked = append(w.acked, name)
		case apierrors.IsAlreadyExists(err):
			w.acked = append(w.acked, name)
			w.alreadyExists++
		case apierrors.IsForbidden(err):
			w.forbidden++
		default:
			w.errors++
		}
		w.mu.Unlock()
		if err == nil || apierrors.IsAlreadyExists(err) {
			return true
		}
		if time.Now().After(deadline) {
			w.mu.Lock()
			w.failed++
			w.mu.Unlock()
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// requireAcked waits until the writer has acknowledged n creates more than it had
// when called, and fails the test, saying when, if that takes longer than
// giveUpAfter: writes are under way (before a fault), go on (during one) or
// resume (after it healed).
func (w *writer) requireAcked(t *testing.T, n int, when string) {
	t.Helper()
	w.mu.Lock()
	want := len(w.acked) + n
	w.mu.Unlock()
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.acked) >= want
	}, giveUpAfter, writeInterval, "fewer than %d creates acknowledged %s", n, when)
}

// checkNoneLost lists the namespace through client and requires every acknowledged
// create to be there; it returns how many were acknowledged and found.
func (w *writer) checkNoneLost(t *testing.T, client versioned.Interface) (acked, found int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	list, err := client.ExampleV1().Databases(w.ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	stored := map[string]bool{}
	for _, db := range list.Items {
		stored[db.Name] = true
	}
	var lost []string
	for _, name := range w.acked {
		if stored[name] {
			found++
		} else {
			lost = append(lost, name)
		}
	}
	require.Empty(t, lost, "acknowledged creates lost")
	return len(w.acked), found
}
