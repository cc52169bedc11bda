package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// metricsCostGoal is the most the controller's CPU and resident memory may be while
// Prometheus scrapes its per-Database metrics, as a ratio to the same with no scrape.
const metricsCostGoal = 1.1

// metricsCostResult is what the per-Database metrics cost the controller. Its collector
// computes them from the controller's cache at each scrape and keeps nothing between scrapes,
// so the controller "without them" is the same process not scraped: once the controller has
// settled on the Databases of its runs (settleCPU), the bench alternates windows in which
// /metrics is scraped every ScrapeInterval with windows in which it is not (ABBA: unscraped,
// scraped, scraped, unscraped) and compares the controller's CPU and resident memory.
type metricsCostResult struct {
	// Databases is how many Databases the controller reported (database_info samples).
	Databases int `json:"databases"`
	// SettleSeconds is how long the controller took to settle before the windows.
	SettleSeconds float64 `json:"settleSeconds"`
	// Samples is the samples of a scrape; DatabaseSamples those of the per-Database metrics
	// (database_*, not database_controller_*); Bytes the body's size (text format 0.0.4).
	Samples         int `json:"samples"`
	DatabaseSamples int `json:"databaseSamples"`
	Bytes           int `json:"bytes"`

	Window         Duration  `json:"windowSeconds"`
	ScrapeInterval Duration  `json:"scrapeIntervalSeconds"`
	Scrapes        int       `json:"scrapes"`
	ScrapeMs       latencies `json:"scrapeMs"` // from the request to the body's last byte

	// CPUUnscraped and CPUScraped are the controller's CPU seconds over the two windows of
	// each kind; RSS*MiB the mean of its resident set at the end of each.
	CPUUnscraped    float64 `json:"cpuSecondsUnscraped"`
	CPUScraped      float64 `json:"cpuSecondsScraped"`
	CPURatio        float64 `json:"cpuRatio"`
	RSSUnscrapedMiB float64 `json:"rssMiBUnscraped"`
	RSSScrapedMiB   float64 `json:"rssMiBScraped"`
	RSSRatio        float64 `json:"rssRatio"`
}

// runMetricsCost measures metricsCostResult on the controller as the controller runs left
// it: call it after them.
func (b *bench) runMetricsCost(ctx context.Context, window, interval time.Duration) (*metricsCostResult, error) {
	pid := b.cluster.PID(procCtl)
	url := b.cluster.ControllerURL + "/metrics"
	out := &metricsCostResult{Window: Duration(window), ScrapeInterval: Duration(interval)}
	var took []time.Duration
	var rssUnscraped, rssScraped float64

	// The last run's Databases may still be turning Ready (a run past its readyTimeout):
	// the windows start once the controller's CPU says it has settled.
	t0 := time.Now()
	if err := settle(ctx, pid, settleSpan, settleCPU, settleTimeout); err != nil {
		return nil, err
	}
	out.SettleSeconds = round3(time.Since(t0).Seconds())
	logf("  metrics cost: the controller settled in %.0f s", out.SettleSeconds)

	for i, scraped := range []bool{false, true, true, false} {
		cpu0, err := procCPU(pid)
		if err != nil {
			return nil, err
		}
		end := time.Now().Add(window)
		if scraped {
			for next := time.Now(); next.Before(end); next = next.Add(interval) {
				if err := sleepUntil(ctx, next); err != nil {
					return nil, err
				}
				t0 := time.Now()
				body, err := httpGet(ctx, b.controller, url)
				if err != nil {
					return nil, err
				}
				took = append(took, time.Since(t0))
				out.Databases, out.Samples, out.DatabaseSamples, out.Bytes = countSamples(body)
			}
		}
		if err := sleepUntil(ctx, end); err != nil {
			return nil, err
		}
		cpu1, err := procCPU(pid)
		if err != nil {
			return nil, err
		}
		rss, _, err := procMem(pid)
		if err != nil {
			return nil, err
		}
		if scraped {
			out.CPUScraped += (cpu1 - cpu0).Seconds()
			rssScraped += mib(rss) / 2
		} else {
			out.CPUUnscraped += (cpu1 - cpu0).Seconds()
			rssUnscraped += mib(rss) / 2
		}
		logf("  metrics cost: window %d (%s): controller CPU %.2f s, RSS %.0f MiB",
			i+1, map[bool]string{true: "scraped", false: "not scraped"}[scraped], (cpu1 - cpu0).Seconds(), mib(rss))
	}
	out.Scrapes = len(took)
	out.ScrapeMs = summarise(took)
	out.CPUUnscraped, out.CPUScraped = round3(out.CPUUnscraped), round3(out.CPUScraped)
	out.CPURatio = round3(ratio(out.CPUScraped, out.CPUUnscraped))
	out.RSSUnscrapedMiB, out.RSSScrapedMiB = round3(rssUnscraped), round3(rssScraped)
	out.RSSRatio = round3(ratio(rssScraped, rssUnscraped))
	return out, nil
}

// The controller has settled when it used less than settleCPU of a core over settleSpan;
// settle gives up after settleTimeout. At 1,000 Databases it uses about 0.01 of a core once
// every Database is Ready, and most of a core while some are turning Ready.
const (
	settleSpan    = 10 * time.Second
	settleCPU     = 0.1
	settleTimeout = 15 * time.Minute
)

// settle waits until process pid used less than cores of a core over a span, or fails after
// timeout.
func settle(ctx context.Context, pid int, span time.Duration, cores float64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		cpu0, err := procCPU(pid)
		if err != nil {
			return err
		}
		if err := sleepUntil(ctx, time.Now().Add(span)); err != nil {
			return err
		}
		cpu1, err := procCPU(pid)
		if err != nil {
			return err
		}
		used := (cpu1 - cpu0).Seconds() / span.Seconds()
		if used < cores {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the controller did not settle in %v: it used %.2f of a core in the last %v", timeout, used, span)
		}
	}
}

// countSamples counts a text-format scrape's samples: the Databases (database_info), every
// sample, and those of the per-Database metrics.
func countSamples(body string) (databases, samples, databaseSamples, bytes int) {
	for line := range strings.Lines(body) {
		if line == "" || line[0] == '#' || strings.TrimSpace(line) == "" {
			continue
		}
		samples++
		if strings.HasPrefix(line, "database_") && !strings.HasPrefix(line, "database_controller_") {
			databaseSamples++
		}
		if strings.HasPrefix(line, "database_info{") {
			databases++
		}
	}
	return databases, samples, databaseSamples, len(body)
}

func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-time.After(time.Until(t)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// printMetricsCost writes m as a Markdown table and its ratios.
func printMetricsCost(w io.Writer, m *metricsCostResult) {
	fmt.Fprintf(w, "\nThe windows began once the controller had settled (under %.1f of a core over %.0f s), %.0f s after the last controller run.\n", settleCPU, settleSpan.Seconds(), m.SettleSeconds)
	fmt.Fprintln(w, "\n| Databases | samples per scrape (per-Database) | bytes | scrape p50 / max ms | windows | CPU s not scraped | CPU s scraped | ratio | RSS MiB not scraped | RSS MiB scraped | ratio |")
	fmt.Fprintln(w, "|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|")
	fmt.Fprintf(w, "| %d | %d (%d) | %d | %.1f / %.1f | 2 × %.0f s each, a scrape every %.0f s (%d) | %.2f | %.2f | **%.2f×** | %.0f | %.0f | **%.2f×** |\n",
		m.Databases, m.Samples, m.DatabaseSamples, m.Bytes, m.ScrapeMs.P50, m.ScrapeMs.Max,
		time.Duration(m.Window).Seconds(), time.Duration(m.ScrapeInterval).Seconds(), m.Scrapes,
		m.CPUUnscraped, m.CPUScraped, m.CPURatio, m.RSSUnscrapedMiB, m.RSSScrapedMiB, m.RSSRatio)
}

// metricsCostGoalLine is the goal line of m (verdict turns the outcome into the line's word).
func metricsCostGoalLine(m *metricsCostResult, verdict func(bool) string) string {
	ok := m.CPURatio > 0 && m.CPURatio <= metricsCostGoal && m.RSSRatio > 0 && m.RSSRatio <= metricsCostGoal
	return fmt.Sprintf("controller: CPU and memory with its metrics scraped every %.0f s ≤ %.1f× without, at %d Databases: %s (CPU %.2f×: %.2f s against %.2f s; RSS %.2f×: %.0f MiB against %.0f MiB); a scrape takes %.1f ms (p50)",
		time.Duration(m.ScrapeInterval).Seconds(), metricsCostGoal, m.Databases, verdict(ok), m.CPURatio, m.CPUScraped, m.CPUUnscraped,
		m.RSSRatio, m.RSSScrapedMiB, m.RSSUnscrapedMiB, m.ScrapeMs.P50)
}
