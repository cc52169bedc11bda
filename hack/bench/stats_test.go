package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func millis(ms ...float64) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m * float64(time.Millisecond))
	}
	return out
}

func TestSummariseTakesNearestRankQuantilesAndTheMean(t *testing.T) {
	// 1 ms to 100 ms, shuffled: the nearest-rank p50 is the 50th value, p90 the 90th, p99 the
	// 99th.
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, millis(float64(i))...)
	}
	d[0], d[37] = d[37], d[0]
	unsorted := slices.Clone(d)

	require.Equal(t, latencies{P50: 50, P90: 90, P99: 99, Max: 100, Mean: 50.5}, summarise(d))
	require.Equal(t, unsorted, d, "the input is not reordered")
}

func TestSummariseOfFewSamples(t *testing.T) {
	require.Equal(t, latencies{}, summarise(nil))
	require.Equal(t, latencies{P50: 7, P90: 7, P99: 7, Max: 7, Mean: 7}, summarise(millis(7)))
	// Two samples: rank ceil(0.5*2) = 1 is the smaller; p90 and p99 the larger.
	require.Equal(t, latencies{P50: 1, P90: 3, P99: 3, Max: 3, Mean: 2}, summarise(millis(3, 1)))
	// Means and quantiles keep microseconds, rounded to three decimals of a millisecond.
	require.Equal(t, latencies{P50: 0.001, P90: 0.003, P99: 0.003, Max: 0.003, Mean: 0.002},
		summarise([]time.Duration{2600 * time.Nanosecond, 1200 * time.Nanosecond, 1 * time.Microsecond}))
}

func TestQuantileClampsToTheSample(t *testing.T) {
	s := millis(1, 2, 3, 4)
	require.Equal(t, s[0], quantile(s, 0))
	require.Equal(t, s[0], quantile(s, 0.25))
	require.Equal(t, s[1], quantile(s, 0.26))
	require.Equal(t, s[3], quantile(s, 1))
	require.Equal(t, s[3], quantile(s, 1.5))
}

func TestRound3AndMiB(t *testing.T) {
	require.Equal(t, 1.235, round3(1.2345))
	require.Equal(t, -0.001, round3(-0.0005001))
	require.Equal(t, 1.5, mib(3<<19))
	require.Equal(t, 0.1, mib(100<<10), "tenths of a MiB")
}

func TestRatioIsZeroWithoutADenominator(t *testing.T) {
	require.Equal(t, 2.5, ratio(5, 2))
	require.Equal(t, 1.0/3, ratio(1, 3), "unrounded")
	require.Equal(t, 0.0, ratio(5, 0))
}

func TestRunCallsEveryIndexOnceWithBoundedConcurrency(t *testing.T) {
	const conc, n = 4, 200
	var (
		mu             sync.Mutex
		seen           = map[int]int{}
		inFlight, peak atomic.Int32
	)
	res := run(context.Background(), conc, n, time.Minute, func(_ context.Context, i int) error {
		now := inFlight.Add(1)
		for {
			p := peak.Load()
			if now <= p || peak.CompareAndSwap(p, now) {
				break
			}
		}
		time.Sleep(100 * time.Microsecond)
		inFlight.Add(-1)
		mu.Lock()
		seen[i]++
		mu.Unlock()
		if i%10 == 3 {
			return fmt.Errorf("op %d failed", i)
		}
		return nil
	})
	require.Equal(t, n, res.Ops)
	require.Len(t, res.Latencies, n)
	require.Equal(t, n/10, res.Errors)
	require.Regexp(t, `^op \d*3 failed$`, res.FirstErr)
	require.Len(t, seen, n)
	for i := range n {
		require.Equal(t, 1, seen[i], "index %d", i)
	}
	require.LessOrEqual(t, peak.Load(), int32(conc))
	require.Greater(t, peak.Load(), int32(1), "the goroutines overlap")
	for _, l := range res.Latencies {
		require.GreaterOrEqual(t, l, 100*time.Microsecond)
	}
	require.Greater(t, res.Wall, time.Duration(0))
}

// A run of a million 5 ms operations on 2 goroutines (2500 s) with a budget of 50 ms
// returns having done some; it fails the test if it has not returned within a minute.
func TestRunStopsAtItsBudget(t *testing.T) {
	done := make(chan runResult, 1)
	go func() {
		done <- run(context.Background(), 2, 1_000_000, 50*time.Millisecond, func(context.Context, int) error {
			time.Sleep(5 * time.Millisecond)
			return nil
		})
	}()
	var res runResult
	select {
	case res = <-done:
	case <-time.After(time.Minute):
		t.Fatal("run went on a minute past its budget of 50ms")
	}
	t.Logf("%d operations in %v", res.Ops, res.Wall)
	require.Less(t, res.Ops, 1_000_000)
	require.Positive(t, res.Ops)
}

func TestRunStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	res := run(ctx, 1, 100, time.Minute, func(context.Context, int) error {
		if calls.Add(1) == 3 {
			cancel()
		}
		return errors.New("refused")
	})
	require.Equal(t, 3, res.Ops)
	require.Equal(t, 3, res.Errors)
	require.Equal(t, "refused", res.FirstErr)
}

func TestStatCPUAddsUserAndSystemTimeAfterTheCommandName(t *testing.T) {
	// proc(5): pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	// cmajflt utime stime …; the command name may hold spaces and parentheses.
	stat := "4242 (kube (api) server) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 12 0 1000 0 0\n"
	d, err := statCPU(stat)
	require.NoError(t, err)
	require.Equal(t, 3800*time.Millisecond, d, "(250 + 130) ticks of 10 ms")

	_, err = statCPU("4242 kube-apiserver S 1")
	require.ErrorContains(t, err, "unexpected format")
	_, err = statCPU("4242 (x) S 1 2 3")
	require.ErrorContains(t, err, "too few fields")
	_, err = statCPU("4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 a 130 0")
	require.ErrorContains(t, err, "bad times")
}

func TestStatusMemReadsResidentAndPeakSizes(t *testing.T) {
	status := "Name:\tkube-apiserver\nVmPeak:\t 2000000 kB\nVmHWM:\t  300000 kB\nVmRSS:\t  204800 kB\nThreads:\t12\n"
	rss, hwm := statusMem(status)
	require.Equal(t, int64(204800<<10), rss)
	require.Equal(t, int64(300000<<10), hwm)
	rss, hwm = statusMem("Name:\tzombie\n")
	require.Zero(t, rss)
	require.Zero(t, hwm)
}

func TestProcCPUAndMemOfThisProcess(t *testing.T) {
	before, err := procCPU(selfPID())
	require.NoError(t, err)
	deadline := time.Now().Add(300 * time.Millisecond)
	x := 0.0
	for time.Now().Before(deadline) {
		x += math.Sqrt(x + 1)
	}
	after, err := procCPU(selfPID())
	require.NoError(t, err)
	require.Greater(t, after, before, "300 ms of spinning shows in utime (%v)", x)

	rss, hwm, err := procMem(selfPID())
	require.NoError(t, err)
	require.Positive(t, rss)
	require.GreaterOrEqual(t, hwm, rss)
}

func TestHistogramQuantilesInterpolatesTheIncreaseBetweenScrapes(t *testing.T) {
	scrape := func(b1, b2, b5, inf float64) string {
		return fmt.Sprintf(`# TYPE request_duration_seconds histogram
request_duration_seconds_bucket{verb="GET",le="0.001"} %g
request_duration_seconds_bucket{verb="GET",le="0.002"} %g
request_duration_seconds_bucket{verb="GET",le="0.005"} %g
request_duration_seconds_bucket{verb="GET",le="+Inf"} %g
request_duration_seconds_bucket{verb="PUT",le="0.001"} 1000
request_duration_seconds_bucket{verb="PUT",le="+Inf"} 1000
`, b1, b2, b5, inf)
	}
	// Between the scrapes: 50 requests under 1 ms, 40 from 1 to 2 ms, 10 from 2 to 5 ms.
	before, after := scrape(10, 10, 10, 10), scrape(60, 100, 110, 110)
	l := histogramQuantiles(before, after, "request_duration_seconds", `verb="GET"`)
	require.NotNil(t, l)
	require.Equal(t, 1.0, l.P50, "the 50th of 100 is the top of the first bucket")
	require.Equal(t, 2.0, l.P90)
	require.Equal(t, 4.7, l.P99, "2 ms + (99-90)/10 of the 3 ms bucket")
	require.Empty(t, l.Capped)

	// Past the last finite bucket the quantile is its bound, marked as a lower bound.
	l = histogramQuantiles(scrape(0, 0, 0, 0), scrape(50, 50, 50, 100), "request_duration_seconds", `verb="GET"`)
	require.Equal(t, 1.0, l.P50)
	require.Equal(t, 5.0, l.P99)
	require.Equal(t, []string{"p90", "p99"}, l.Capped)

	require.Nil(t, histogramQuantiles(after, after, "request_duration_seconds", `verb="GET"`), "no requests between the scrapes")
	require.Nil(t, histogramQuantiles(before, after, "other_seconds"))
}

func selfPID() int { return os.Getpid() }
