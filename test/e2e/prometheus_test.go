//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/test/alerts"
)

// prometheus is a real Prometheus (Debian's, bin/prometheus from make prometheus) on loopback.
type prometheus struct{ url string }

// startPrometheus runs Prometheus for the rest of the test: it scrapes the controller's
// /metrics every 2 s with token (a ServiceAccount token whose account may get /metrics), its
// certificate unverified as the PodMonitor of artifacts/monitoring leaves it, and evaluates
// the alert rules of artifacts/monitoring every 2 s, each rule's "for" set to forDuration (the
// durations themselves are test/alerts' to pin).
func startPrometheus(t *testing.T, token, forDuration string) prometheus {
	t.Helper()
	bin := filepath.Join(root, "bin", "prometheus", "prometheus")
	_, err := os.Stat(bin)
	require.NoError(t, err, "no Prometheus: run make prometheus")
	dir := t.TempDir()
	rules, err := alerts.RuleFile(alerts.PrometheusRulePath(), func(rule map[string]any) {
		if _, ok := rule["for"]; ok {
			rule["for"] = forDuration
		}
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600))
	target, err := url.Parse(cluster.ControllerURL)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), fmt.Appendf(nil, `global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files: [rules.yaml]
scrape_configs:
- job_name: database-controller
  scheme: https
  tls_config: {insecure_skip_verify: true}
  authorization: {credentials_file: token}
  static_configs: [{targets: [%q]}]
`, target.Host), 0o644))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	require.NoError(t, err)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("prometheus log:\n%s", lastLines(string(b), 30))
		}
	})
	p := prometheus{url: "http://" + addr}
	eventually(t, time.Minute, func() error {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready: %s", resp.Status)
		}
		return nil
	})
	return p
}

// get reads the API's answer at path (/api/v1/...) into data.
func (p prometheus) get(path string, query url.Values, data any) error {
	resp, err := http.Get(p.url + path + "?" + query.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return err
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", path, body.Error)
	}
	return json.Unmarshal(body.Data, data)
}

// query returns the value of each series of the instant query q, by its labels' text.
func (p prometheus) query(q string) (map[string]string, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {q}}, &data); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range data.Result {
		out[fmt.Sprint(r.Metric)] = fmt.Sprint(r.Value[1])
	}
	return out, nil
}

// alert is an alert of the API's /api/v1/alerts.
type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// alerts returns the pending and firing alerts of the namespace ns.
func (p prometheus) alerts(ns string) ([]alert, error) {
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	if err := p.get("/api/v1/alerts", nil, &data); err != nil {
		return nil, err
	}
	var out []alert
	for _, a := range data.Alerts {
		if a.Labels["namespace"] == ns {
			out = append(out, a)
		}
	}
	return out, nil
}

// TestPrometheusFiresTheReplicationAlert: a real Prometheus scrapes the controller as the
// PodMonitor of artifacts/monitoring does and evaluates its PrometheusRule; every query of
// the Grafana dashboard returns data for a PostgreSQL Database on the real node. A replica of a
// PostgreSQL Database on the real node is frozen: DatabaseReplicaNotStreaming fires for that
// member, and no other alert does for the Database (its primary keeps taking writes); once it
// is thawed and streams again, the alert ends.
func TestPrometheusFiresTheReplicationAlert(t *testing.T) {
	img := realNodeImage(t, examplev1.EnginePostgreSQL)
	ns := restrictedNamespace(t, "e2e-alerts")
	const db = "watched"
	kubectlIn(t, replicatedDatabase(ns, db, examplev1.EnginePostgreSQL, img.Line, 2), "apply", "-f", "-")
	waitReplicating(t, ns, db, db+"-0", 2)

	kubectl(t, "create", "serviceaccount", "prometheus", "-n", ns)
	binding := "e2e-alerts-prometheus"
	kubectl(t, "create", "clusterrolebinding", binding, "--clusterrole=database-metrics-reader", "--serviceaccount="+ns+":prometheus")
	t.Cleanup(func() { kubectlAs(cluster.KubeconfigPath, "", "delete", "clusterrolebinding", binding) })
	token := strings.TrimSpace(kubectl(t, "create", "token", "prometheus", "-n", ns, "--duration=1h"))
	p := startPrometheus(t, token, "5s")

	streaming := fmt.Sprintf(`database_member_streaming{namespace=%q,database=%q,member=%q}`, ns, db, db+"-1")
	eventually(t, 2*time.Minute, func() error {
		got, err := p.query("max(" + streaming + ")")
		if err != nil {
			return err
		}
		if len(got) != 1 || got["map[]"] != "1" {
			return fmt.Errorf("%s: %v, want 1 (scraped)", streaming, got)
		}
		return nil
	})

	// Every query of the Grafana dashboard returns data for this Database.
	queries, err := alerts.DashboardQueries(ns, db)
	require.NoError(t, err)
	for _, q := range queries {
		eventually(t, time.Minute, func() error {
			got, err := p.query(q)
			if err != nil {
				return err
			}
			if len(got) == 0 {
				return fmt.Errorf("the dashboard's query %s returns nothing", q)
			}
			return nil
		})
	}

	frozen := time.Now()
	thaw := freeze(t, ns, db+"-1")
	var fired []alert
	eventually(t, 2*time.Minute, func() error {
		var err error
		if fired, err = p.alerts(ns); err != nil {
			return err
		}
		for _, a := range fired {
			if a.Labels["alertname"] == "DatabaseReplicaNotStreaming" && a.Labels["member"] == db+"-1" && a.State == "firing" {
				return nil
			}
		}
		return fmt.Errorf("DatabaseReplicaNotStreaming not firing for %s-1: %+v", db, fired)
	})
	t.Logf("measured: DatabaseReplicaNotStreaming firing %v after the replica froze (scrape and evaluation every 2 s, for 5s)", time.Since(frozen).Round(time.Second))
	for _, a := range fired {
		require.Contains(t, []string{"DatabaseReplicaNotStreaming", "DatabaseNotReady"}, a.Labels["alertname"],
			"the primary takes writes throughout: %+v", a)
		require.Equal(t, db, a.Labels["database"])
	}

	thaw()
	eventually(t, 2*time.Minute, func() error {
		got, err := p.alerts(ns)
		if err != nil {
			return err
		}
		for _, a := range got {
			if a.Labels["alertname"] == "DatabaseReplicaNotStreaming" {
				return fmt.Errorf("still %s: %+v", a.State, a)
			}
		}
		return nil
	})
}
