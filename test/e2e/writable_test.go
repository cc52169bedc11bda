//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine/postgresql/pgclient"
	"example.com/database-apiserver/pkg/names"
)

// writableSamples is what sampleWritable saw: how many rounds it asked every Pod; the most
// servers whose Pods are not being deleted that answered writable in one round, with the
// Pods of that round; the most rounds in which one server whose Pod is being deleted (a
// fenced former primary whose kubelet is stopping it) answered writable beside another; and
// the timeline of what each Pod answered, when it changed, among the test's own marks
// (mark), for the reader of a failure.
type writableSamples struct {
	mu          sync.Mutex
	rounds      int
	most        int
	which       []string
	leaving     map[types.UID]int
	mostLeaving int
	answers     map[string]string
	timeline    []string
}

func (w *writableSamples) result() (rounds, most int, which []string, mostLeaving int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rounds, w.most, w.which, w.mostLeaving
}

// round records the Pods whose servers answered writable in one round: live, whose Pods are
// not being deleted, and leaving, whose Pods are.
func (w *writableSamples) round(live, leaving []corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rounds++
	podNames := func(pods []corev1.Pod) []string {
		var n []string
		for _, p := range pods {
			n = append(n, p.Name)
		}
		return n
	}
	if len(live) > w.most {
		w.most, w.which = len(live), podNames(live)
	}
	if len(live)+len(leaving) < 2 {
		return
	}
	for _, p := range leaving {
		w.leaving[p.UID]++
		w.mostLeaving = max(w.mostLeaving, w.leaving[p.UID])
	}
	w.note(fmt.Sprintf("round %d: writable at once: %v, and %v whose Pods are being deleted", w.rounds, podNames(live), podNames(leaving)))
}

// mark adds what the test does to the timeline.
func (w *writableSamples) mark(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.note("test: " + fmt.Sprintf(format, args...))
}

// note adds line to the timeline at the time it is called; w.mu is held.
func (w *writableSamples) note(line string) {
	w.timeline = append(w.timeline, time.Now().Format("15:04:05.000")+" "+line)
}

// answered records what the Pod p answered, when it differs from its last answer.
func (w *writableSamples) answered(p corev1.Pod, answer string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p.DeletionTimestamp != nil {
		answer += " (Pod being deleted)"
	}
	key := p.Name + " " + string(p.UID)[:8] + " " + p.Status.PodIP
	if w.answers[p.Name] == key+": "+answer {
		return
	}
	w.answers[p.Name] = key + ": " + answer
	w.note(key + ": " + answer)
}

// String is the timeline, one line each.
func (w *writableSamples) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.timeline, "\n")
}

// writableProbeTimeout bounds one question to one server: a frozen or cut-off server does
// not answer, and counts as not writable.
const writableProbeTimeout = 900 * time.Millisecond

// sampleWritable asks, once a second until the test ends, the server of every running Pod
// of the Database db at its Pod IP, as the superuser and through the engine's own driver,
// whether it takes writes (PostgreSQL: not in recovery; MySQL: read_only off), all Pods of a
// round at once, and records the most that said so in one round.
func sampleWritable(t *testing.T, engine examplev1.Engine, ns, db string) *writableSamples {
	t.Helper()
	secret := credentials(t, ns, db)
	port, err := strconv.Atoi(secret[names.SecretKeyPort])
	require.NoError(t, err)
	user, password := secret[names.SecretKeySuperuserUsername], secret[names.SecretKeySuperuserPassword]
	// writable asks the server at ip; answer says what it answered, for the timeline.
	writable := func(ctx context.Context, ip string) (yes bool, answer string) {
		ctx, cancel := context.WithTimeout(ctx, writableProbeTimeout)
		defer cancel()
		says := func(err error, writable bool) (bool, string) {
			var timeout net.Error
			switch {
			case errors.Is(err, syscall.ECONNREFUSED):
				return false, "refused"
			case err != nil && (ctx.Err() != nil || errors.As(err, &timeout) && timeout.Timeout()):
				return false, "no answer"
			case err != nil:
				return false, "error: " + err.Error()
			case writable:
				return true, "writable"
			}
			return false, "read-only"
		}
		switch engine {
		case examplev1.EnginePostgreSQL:
			conn, err := pgDial(ctx, pgclient.Server{Host: ip, Port: int32(port), User: user, Password: password, Database: secret[names.SecretKeyDatabase]})
			if err != nil {
				return says(err, false)
			}
			defer conn.Close(context.Background())
			var primary bool
			err = conn.QueryRow(ctx, `SELECT NOT pg_is_in_recovery()`).Scan(&primary)
			return says(err, primary)
		default:
			cfg := driver.NewConfig()
			cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(ip, strconv.Itoa(port))
			cfg.User, cfg.Passwd = user, password
			cfg.TLSConfig = "preferred"
			cfg.Timeout, cfg.ReadTimeout = writableProbeTimeout, writableProbeTimeout
			connector, err := driver.NewConnector(cfg)
			if err != nil {
				return says(err, false)
			}
			conn := sql.OpenDB(connector)
			defer conn.Close()
			var readOnly int
			err = conn.QueryRowContext(ctx, `SELECT @@global.read_only`).Scan(&readOnly)
			return says(err, readOnly == 0)
		}
	}
	w := &writableSamples{answers: map[string]string{}, leaving: map[types.UID]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	selector := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/instance": db}).String()
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			pods, err := kube(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err == nil {
				var mu sync.Mutex
				var live, leaving []corev1.Pod
				var wg sync.WaitGroup
				for _, p := range pods.Items {
					ordinal, found := strings.CutPrefix(p.Name, db+"-")
					if _, err := strconv.Atoi(ordinal); !found || err != nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
						continue
					}
					wg.Go(func() {
						ok, answer := writable(ctx, p.Status.PodIP)
						if ctx.Err() != nil {
							return
						}
						w.answered(p, answer)
						mu.Lock()
						defer mu.Unlock()
						switch {
						case ok && p.DeletionTimestamp != nil:
							leaving = append(leaving, p)
						case ok:
							live = append(live, p)
						}
					})
				}
				wg.Wait()
				if ctx.Err() == nil {
					w.round(live, leaving)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}
