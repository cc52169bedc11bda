package example

import "testing"

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
