package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// latencies summarises durations.
type latencies struct {
	P50, P90, P99, Max, Mean float64 // milliseconds
	// Capped, for quantiles read from a histogram, names the quantiles that fell in its last
	// (+Inf) bucket: their value is the top finite bound, a lower bound of the truth.
	Capped []string `json:"capped,omitempty"`
}

func summarise(d []time.Duration) latencies {
	if len(d) == 0 {
		return latencies{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	ms := func(x time.Duration) float64 { return round3(float64(x) / float64(time.Millisecond)) }
	var sum time.Duration
	for _, x := range s {
		sum += x
	}
	return latencies{
		P50:  ms(quantile(s, 0.50)),
		P90:  ms(quantile(s, 0.90)),
		P99:  ms(quantile(s, 0.99)),
		Max:  ms(s[len(s)-1]),
		Mean: ms(sum / time.Duration(len(s))),
	}
}

// quantile of sorted s, nearest rank.
func quantile(s []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// runResult is what run measured.
type runResult struct {
	Ops       int
	Errors    int
	FirstErr  string
	Wall      time.Duration
	Latencies []time.Duration
}

// run calls op(ctx, i) for i in [0, n) from conc goroutines, each op timed, until all are done
// or budget has passed (ops already started finish). Errors are counted, not fatal.
func run(ctx context.Context, conc, n int, budget time.Duration, op func(ctx context.Context, i int) error) runResult {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		res      runResult
		wg       sync.WaitGroup
		deadline = time.Now().Add(budget)
	)
	lat := make([][]time.Duration, conc)
	errs := make([]int, conc)
	start := time.Now()
	for w := range conc {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t := time.Now()
				err := op(ctx, i)
				lat[w] = append(lat[w], time.Since(t))
				if err != nil {
					errs[w]++
					mu.Lock()
					if res.FirstErr == "" {
						res.FirstErr = err.Error()
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	res.Wall = time.Since(start)
	for w := range conc {
		res.Latencies = append(res.Latencies, lat[w]...)
		res.Errors += errs[w]
	}
	res.Ops = len(res.Latencies)
	return res
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every Linux we run on.
const clockTicks = 100

// procCPU returns the CPU time (user + system) of pid so far.
func procCPU(pid int) (time.Duration, error) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	d, err := statCPU(string(b))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// statCPU returns utime + stime of a /proc/<pid>/stat line (proc(5)), in clockTicks.
func statCPU(s string) (time.Duration, error) {
	// The command name (field 2) may hold spaces; the fields after it start past the last ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unexpected format")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, errors.New("too few fields")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad times")
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// procMem returns VmRSS and VmHWM (peak RSS) of pid, in bytes.
func procMem(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	rss, hwm = statusMem(string(b))
	return rss, hwm, nil
}

// statusMem returns VmRSS and VmHWM of a /proc/<pid>/status text (proc(5)), in bytes; 0 for
// one it lacks.
func statusMem(status string) (rss, hwm int64) {
	for line := range strings.SplitSeq(status, "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			hwm = kb << 10
		}
	}
	return rss, hwm
}

// loadAvg is /proc/loadavg's first three numbers.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// cpuMeter samples the CPU time of named processes.
type cpuMeter map[string]int // name -> pid

func (m cpuMeter) sample() map[string]time.Duration {
	out := make(map[string]time.Duration, len(m))
	for name, pid := range m {
		if d, err := procCPU(pid); err == nil {
			out[name] = d
		}
	}
	return out
}

// since returns the CPU seconds each process used since before.
func (m cpuMeter) since(before map[string]time.Duration) map[string]float64 {
	now := m.sample()
	out := make(map[string]float64, len(now))
	for name, d := range now {
		out[name] = round3((d - before[name]).Seconds())
	}
	return out
}

func mib(b int64) float64 { return math.Round(float64(b)/(1<<20)*10) / 10 }
