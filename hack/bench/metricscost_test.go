package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCountSamples counts a scrape's samples, the per-Database ones apart from the
// controller's own (database_controller_*), and the Databases by database_info.
func TestCountSamples(t *testing.T) {
	body := `# HELP database_controller_reconcile_total Number of Database reconciles by result.
# TYPE database_controller_reconcile_total counter
database_controller_reconcile_total{result="success"} 12
# HELP database_info Information about a Database.
# TYPE database_info gauge
database_info{database="a",engine="postgresql",namespace="shop",version="15"} 1
database_info{database="b",engine="mysql",namespace="shop",version="9.7"} 1
database_member_ready{database="a",member="a-0",namespace="shop"} 1
go_goroutines 42
`
	databases, samples, databaseSamples, bytes := countSamples(body)
	require.Equal(t, 2, databases)
	require.Equal(t, 5, samples)
	require.Equal(t, 3, databaseSamples)
	require.Equal(t, len(body), bytes)
}

// TestMetricsCostGoalLine judges both ratios: either past the goal is NOT MET.
func TestMetricsCostGoalLine(t *testing.T) {
	mark := func(ok bool) string {
		if ok {
			return "MET"
		}
		return "NOT MET"
	}
	m := &metricsCostResult{Databases: 1000, ScrapeInterval: Duration(30 * time.Second),
		CPUScraped: 10.5, CPUUnscraped: 10, CPURatio: 1.05, RSSScrapedMiB: 260, RSSUnscrapedMiB: 250, RSSRatio: 1.04}
	require.Contains(t, metricsCostGoalLine(m, mark), ": MET (CPU 1.05×")
	m.RSSRatio = 1.2
	require.True(t, strings.Contains(metricsCostGoalLine(m, mark), ": NOT MET"))
	m.RSSRatio, m.CPURatio = 1.04, 1.11
	require.True(t, strings.Contains(metricsCostGoalLine(m, mark), ": NOT MET"))
}
