package main

import (
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
