// Package alerts reads the alert rules of artifacts/monitoring for the tests that run them:
// its own, with Prometheus's promtool, and test/e2e's, on a real Prometheus.
package alerts

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"sigs.k8s.io/yaml"
)

// PrometheusRulePath is artifacts/monitoring/prometheusrule.yaml in this checkout.
func PrometheusRulePath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "artifacts", "monitoring", "prometheusrule.yaml")
}

// RuleFile returns the groups of the PrometheusRule at path as a Prometheus rule file, with
// edit, when not nil, applied to each rule first (a test shortens a rule's "for").
func RuleFile(path string, edit func(rule map[string]any)) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pr struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []struct {
				Name  string           `json:"name"`
				Rules []map[string]any `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &pr); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if pr.Kind != "PrometheusRule" || len(pr.Spec.Groups) == 0 {
		return nil, fmt.Errorf("%s: not a PrometheusRule with groups", path)
	}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if edit != nil {
				edit(r)
			}
		}
	}
	return yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
}

// DashboardQueries returns the PromQL of every panel of artifacts/monitoring/dashboard.json,
// its Grafana variables given values: the namespace ns and the Database db, a range of an
// hour, a rate interval of a minute. A panel without a query is an error.
func DashboardQueries(ns, db string) ([]string, error) {
	path := filepath.Join(filepath.Dir(PrometheusRulePath()), "dashboard.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := yaml.Unmarshal(b, &dashboard); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	vars := strings.NewReplacer("$namespace", ns, "$database", db, "$__range", "1h", "$__rate_interval", "1m")
	var out []string
	for _, p := range dashboard.Panels {
		if len(p.Targets) == 0 {
			return nil, fmt.Errorf("%s: panel %q has no query", path, p.Title)
		}
		for _, target := range p.Targets {
			out = append(out, vars.Replace(target.Expr))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no panel", path)
	}
	return out, nil
}
