//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine/postgresql/pgclient"
	"example.com/database-apiserver/pkg/names"
)

// writableSamples is what sampleWritable saw: how many rounds it asked every Pod, and the
// most servers that answered writable in one round, with the Pods of that round.
type writableSamples struct {
	mu     sync.Mutex
	rounds int
	most   int
	which  []string
}

func (w *writableSamples) result() (rounds, most int, which []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rounds, w.most, w.which
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
	writable := func(ctx context.Context, ip string) bool {
		ctx, cancel := context.WithTimeout(ctx, writableProbeTimeout)
		defer cancel()
		switch engine {
		case examplev1.EnginePostgreSQL:
			conn, err := pgDial(ctx, pgclient.Server{Host: ip, Port: int32(port), User: user, Password: password, Database: secret[names.SecretKeyDatabase]})
			if err != nil {
				return false
			}
			defer conn.Close(context.Background())
			var primary bool
			return conn.QueryRow(ctx, `SELECT NOT pg_is_in_recovery()`).Scan(&primary) == nil && primary
		default:
			cfg := driver.NewConfig()
			cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(ip, strconv.Itoa(port))
			cfg.User, cfg.Passwd = user, password
			cfg.TLSConfig = "preferred"
			cfg.Timeout, cfg.ReadTimeout = writableProbeTimeout, writableProbeTimeout
			connector, err := driver.NewConnector(cfg)
			if err != nil {
				return false
			}
			conn := sql.OpenDB(connector)
			defer conn.Close()
			var readOnly int
			return conn.QueryRowContext(ctx, `SELECT @@global.read_only`).Scan(&readOnly) == nil && readOnly == 0
		}
	}
	w := &writableSamples{}
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
				var yes []string
				var wg sync.WaitGroup
				for _, p := range pods.Items {
					ordinal, found := strings.CutPrefix(p.Name, db+"-")
					if _, err := strconv.Atoi(ordinal); !found || err != nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
						continue
					}
					wg.Go(func() {
						if writable(ctx, p.Status.PodIP) {
							mu.Lock()
							yes = append(yes, p.Name)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				if ctx.Err() == nil {
					w.mu.Lock()
					w.rounds++
					if len(yes) > w.most {
						w.most, w.which = len(yes), yes
					}
					w.mu.Unlock()
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
