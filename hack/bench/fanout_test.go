package main

import (
	"strings"
	"testing"
	"time"
)

func TestFanoutTally(t *testing.T) {
	tally := newFanoutTally(2, 2)
	tally.start(0, "a")
	t0 := tally.started["a"]
	tally.seenBy(0, "a", t0.Add(5*time.Millisecond))
	tally.seenBy(1, "unknown", t0) // not one of the creates: ignored
	select {
	case <-tally.done[0]:
		t.Fatal("create 0 reported done after one of two watchers")
	default:
	}
	tally.seenBy(1, "a", t0.Add(7*time.Millisecond))
	select {
	case <-tally.done[0]:
	default:
		t.Fatal("create 0 not reported done after both watchers")
	}
	tally.start(1, "b")
	tally.seenBy(1, "b", tally.started["b"].Add(time.Millisecond))

	if got := tally.events.Load(); got != 3 {
		t.Errorf("events = %d, want 3", got)
	}
	all := tally.all()
	if len(all) != 3 {
		t.Fatalf("delivery samples = %d, want 3", len(all))
	}
	l := summarise(all)
	if l.Max != 7 || l.P50 != 5 {
		t.Errorf("delivery = %+v, want p50 5 ms, max 7 ms", l)
	}
	select {
	case <-tally.done[1]:
		t.Fatal("create 1 reported done after one of two watchers")
	default:
	}
}

func TestGoalsFanoutAndScale(t *testing.T) {
	res := &results{
		Fanout: []fanoutRow{
			{Target: "ours-proto", Watchers: 1000, Events: 1000, Create: latencies{P99: 30}},
			{Target: "configmaps", Watchers: 1000, Events: 1000, Create: latencies{P99: 20}},
			{Target: "ours-proto", Watchers: 100, Events: 100, Create: latencies{P99: 90}},
			{Target: "configmaps", Watchers: 100, Events: 100, Create: latencies{P99: 10}},
		},
		Scale: &scaleResult{Objects: 100000, Memory: &memoryResult{Objects: 100000,
			Ratio: 0.31, OursDeltaMiB: 31, KubeDeltaMiB: 100, SettledRatio: 0.25, OursSettledDeltaMiB: 25, KubeSettledDeltaMiB: 100}},
		Rows: []row{
			{Target: "ours-proto", Verb: "list-paginated", Objects: 100000, Concurrency: 1, Throughput: 30000},
			{Target: "crd", Verb: "list-paginated", Objects: 100000, Concurrency: 1, Throughput: 10000},
			{Target: "ours-proto", Verb: "list-paginated-etcd", Objects: 100000, Concurrency: 1, Throughput: 20000},
			{Target: "crd", Verb: "list-paginated-etcd", Objects: 100000, Concurrency: 1, Throughput: 10000},
			{Target: "ours-proto", Verb: "get", Concurrency: 8, Throughput: 80},
			{Target: "crd", Verb: "get", Concurrency: 8, Throughput: 100},
		},
	}
	want := []string{
		"fan-out: 1000 watchers through kube-apiserver, create p99 ≤ 1.5× the ConfigMaps' and no event lost: MET (1.50×",
		// The memory goal holds only when both ratios are within it.
		"memory for 100000 objects ≤ 0.3× kube-apiserver's for the CRD's, after the creates and settled: NOT MET (0.31×: +31 MiB against +100 MiB; settled 0.25×",
		"ours-proto: list 100000 in pages of 500 ≥ 3× the CRD's throughput: MET (3.00×",
		"ours-proto: list 100000 in pages of 500 after a compaction (continued pages from etcd) ≥ 3× the CRD's throughput: NOT MET (2.00×",
		"ours-proto: GET at concurrency 8 ≥ 0.85× the CRD's: NOT MET (0.80×)",
	}
	got := strings.Join(goals(res), "\n")
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("goals lack %q:\n%s", w, got)
		}
	}

	res.Scale.Memory.Ratio = 0.3
	if got := strings.Join(goals(res), "\n"); !strings.Contains(got, "after the creates and settled: MET (0.30×") {
		t.Errorf("goals lack the memory goal met at 0.30× and 0.25×:\n%s", got)
	}

	// One lost event fails the fan-out goal whatever the latency; another size is for reference.
	res.Fanout[0].Lost = 1
	res.Scale.Objects, res.Scale.Memory.Objects = 20000, 20000
	got = strings.Join(goals(res), "\n")
	for _, w := range []string{
		"no event lost: NOT MET (1.50×: 30.0 ms against 20.0 ms; 1 of 1001 events lost)",
		"memory for 20000 objects ≤ 0.3× kube-apiserver's for the CRD's, after the creates and settled: for reference, the goal is for 100000",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("goals lack %q:\n%s", w, got)
		}
	}
}
