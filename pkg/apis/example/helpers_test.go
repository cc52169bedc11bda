package example

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodOrdinalReadsOnlyWhatPodNameWrites(t *testing.T) {
	tests := []struct {
		pod     string
		ordinal int32
		ok      bool
	}{
		{"db-0", 0, true},
		{"db-9", 9, true},
		{"db-10", 10, true},
		{"db-2147483647", 2147483647, true},
		{"db-2147483648", 0, false}, // beyond int32
		{"db-00", 0, false},         // leading zero
		{"db-01", 0, false},
		{"db--1", 0, false},
		{"db-+1", 0, false},
		{"db-", 0, false},
		{"db", 0, false},
		{"db-1a", 0, false},
		{"other-1", 0, false},
		{"db-x-1", 0, false},
	}
	for _, tt := range tests {
		ordinal, ok := PodOrdinal("db", tt.pod)
		if ordinal != tt.ordinal || ok != tt.ok {
			t.Errorf("PodOrdinal(%q, %q) = %d, %v; want %d, %v", "db", tt.pod, ordinal, ok, tt.ordinal, tt.ok)
		}
		if ok && PodName("db", ordinal) != tt.pod {
			t.Errorf("PodName(%q, %d) = %q; want %q", "db", ordinal, PodName("db", ordinal), tt.pod)
		}
	}
}

func TestRequestedPrimaryIsNotOneAskedBeforeTheLastFailover(t *testing.T) {
	at := func(s int64) metav1.Time { return metav1.Unix(s, 0) }
	failover, before, after := at(100), at(90), at(110)
	tests := []struct {
		name       string
		lastFailed *metav1.Time
		asked      *metav1.Time
		want       string
	}{
		{"no failover: spec.primary", nil, nil, "db-1"},
		{"no failover, a request recorded", nil, &before, "db-1"},
		{"a failover and no request recorded (spec.primary set at creation)", &failover, nil, ""},
		{"asked before the failover", &failover, &before, ""},
		{"asked after the failover", &failover, &after, "db-1"},
		{"asked in the failover's second", &failover, &failover, "db-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := &Database{Spec: DatabaseSpec{Primary: "db-1"}}
			db.Status.LastFailoverTime = tt.lastFailed
			if tt.asked != nil {
				db.Status.Switchover = &DatabaseSwitchoverStatus{Target: "db-1", RequestedAt: *tt.asked}
			}
			if got := RequestedPrimary(db); got != tt.want {
				t.Errorf("RequestedPrimary = %q, want %q", got, tt.want)
			}
		})
	}
	if got := RequestedPrimary(&Database{Status: DatabaseStatus{LastFailoverTime: &failover, Switchover: &DatabaseSwitchoverStatus{RequestedAt: after}}}); got != "" {
		t.Errorf("no spec.primary: RequestedPrimary = %q, want none", got)
	}
}

func TestRequestTimeIsAfterTheLastFailover(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 700_000_000, time.UTC)
	if got := RequestTime(now, &DatabaseStatus{}); !got.Equal(ptrTime(now.Truncate(time.Second))) {
		t.Errorf("no failover: %v, want now to the second", got)
	}
	ahead := metav1.NewTime(now.Add(30 * time.Second).Truncate(time.Second))
	if got := RequestTime(now, &DatabaseStatus{LastFailoverTime: &ahead}); !got.Equal(ptrTime(ahead.Add(time.Second))) {
		t.Errorf("a failover stamped ahead: %v, want a second after it", got)
	}
	behind := metav1.NewTime(now.Add(-time.Minute).Truncate(time.Second))
	if got := RequestTime(now, &DatabaseStatus{LastFailoverTime: &behind}); !got.Equal(ptrTime(now.Truncate(time.Second))) {
		t.Errorf("a failover a minute before: %v, want now", got)
	}
}

func ptrTime(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }
