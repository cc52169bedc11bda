// The alert rules of artifacts/monitoring, tested with Prometheus's own promtool: `promtool
// check rules` on the PrometheusRule's groups, and `promtool test rules` on the cases in
// testdata, each alert's firing and non-firing ones. PROMTOOL names the program (make test-unit
// fetches Debian's, hack/fetch-prometheus.sh).
package alerts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// promtool returns the promtool PROMTOOL names; the test fails without one.
func promtool(t *testing.T) string {
	t.Helper()
	path := os.Getenv("PROMTOOL")
	require.NotEmpty(t, path, "PROMTOOL is not set: run make test-unit, which fetches promtool (hack/fetch-prometheus.sh) and sets it")
	return path
}

// rules writes the groups of artifacts/monitoring/prometheusrule.yaml, as a Prometheus rule
// file, to rules.yaml in dir.
func rules(t *testing.T, dir string) string {
	t.Helper()
	out, err := RuleFile(PrometheusRulePath(), nil)
	require.NoError(t, err)
	path := filepath.Join(dir, "rules.yaml")
	require.NoError(t, os.WriteFile(path, out, 0o644))
	return path
}

// run runs promtool with args and fails the test with its output when it fails.
func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	require.NoError(t, err, "promtool %v:\n%s", args, out)
	return string(out)
}

func TestAlertRulesAreValid(t *testing.T) {
	out := run(t, "check", "rules", rules(t, t.TempDir()))
	require.Contains(t, out, "SUCCESS: 9 rules found")
}

func TestEachAlertFiresWhenItShouldAndOnlyThen(t *testing.T) {
	dir := t.TempDir()
	rules(t, dir)
	cases, err := os.ReadFile(filepath.Join("testdata", "alerts.test.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alerts.test.yaml"), cases, 0o644))
	out := run(t, "test", "rules", filepath.Join(dir, "alerts.test.yaml"))
	require.Contains(t, out, "SUCCESS")
}

// The PodMonitor selects the controller's Pods (artifacts/deploy/base/controller) by their
// labels and scrapes the port they name, with the token of the Secret it defines.
func TestPodMonitorScrapesTheControllerPods(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	artifacts := filepath.Join(filepath.Dir(file), "..", "..", "artifacts")
	docs := func(path string) []map[string]any {
		b, err := os.ReadFile(filepath.Join(artifacts, path))
		require.NoError(t, err)
		var out []map[string]any
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var m map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(doc), &m))
			out = append(out, m)
		}
		return out
	}
	var deployment, monitor, secret map[string]any
	for _, d := range docs("deploy/base/controller/deployment.yaml") {
		if d["kind"] == "Deployment" {
			deployment = d
		}
	}
	for _, d := range docs("monitoring/podmonitor.yaml") {
		switch d["kind"] {
		case "PodMonitor":
			monitor = d
		case "Secret":
			secret = d
		}
	}
	require.NotNil(t, deployment)
	require.NotNil(t, monitor)
	require.NotNil(t, secret)
	get := func(m map[string]any, path ...string) any {
		var v any = m
		for _, p := range path {
			v = v.(map[string]any)[p]
		}
		return v
	}
	podLabels := get(deployment, "spec", "template", "metadata", "labels").(map[string]any)
	for k, v := range get(monitor, "spec", "selector", "matchLabels").(map[string]any) {
		require.Equal(t, v, podLabels[k], "the PodMonitor selects %s=%v", k, v)
	}
	require.Equal(t, get(deployment, "metadata", "namespace"), get(monitor, "metadata", "namespace"))
	var ports []string
	for _, c := range get(deployment, "spec", "template", "spec", "containers").([]any) {
		for _, p := range c.(map[string]any)["ports"].([]any) {
			ports = append(ports, p.(map[string]any)["name"].(string))
		}
	}
	endpoint := get(monitor, "spec", "podMetricsEndpoints").([]any)[0].(map[string]any)
	require.Contains(t, ports, endpoint["port"])
	require.Equal(t, "/metrics", endpoint["path"])
	require.Equal(t, get(secret, "metadata", "name"), get(endpoint, "authorization", "credentials", "name"))
	require.Equal(t, "kubernetes.io/service-account-token", secret["type"])
}

// Every query of the Grafana dashboard (artifacts/monitoring/dashboard.json), its variables
// given values, is PromQL that Prometheus parses: promtool checks them as recording rules.
// (test/e2e evaluates them against a running Prometheus.)
func TestDashboardQueriesParse(t *testing.T) {
	queries, err := DashboardQueries("shop", "orders")
	require.NoError(t, err)
	var records []map[string]string
	for i, q := range queries {
		records = append(records, map[string]string{"record": fmt.Sprintf("dashboard:query%d", i), "expr": q})
	}
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": records}}})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	require.NoError(t, os.WriteFile(path, out, 0o644))
	require.Contains(t, run(t, "check", "rules", path), fmt.Sprintf("SUCCESS: %d rules found", len(records)))
}
