package myclient

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// GTIDSet is a set of global transaction identifiers in MySQL's text form, as
// @@gtid_executed shows it: "uuid:1-5:7,uuid:tag:1-3" (commas may be followed by a newline;
// a tag, 8.3 and later, applies to the intervals after it). See
// https://dev.mysql.com/doc/refman/8.4/en/replication-gtids-concepts.html.
type GTIDSet map[string][]interval

// interval is the closed range of transaction numbers [first, last].
type interval struct{ first, last uint64 }

// ParseGTIDSet parses s; "" is the empty set.
func ParseGTIDSet(s string) (GTIDSet, error) {
	set := GTIDSet{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		fields := strings.Split(part, ":")
		if len(fields) < 2 {
			return nil, fmt.Errorf("GTID set %q: %q has no transaction numbers", s, part)
		}
		source := strings.ToLower(fields[0])
		key := source
		for _, f := range fields[1:] {
			if f != "" && (f[0] < '0' || f[0] > '9') {
				if !isTag(f) {
					return nil, fmt.Errorf("GTID set %q: %q is neither an interval nor a tag", s, f)
				}
				key = source + ":" + strings.ToLower(f)
				continue
			}
			first, last, found := strings.Cut(f, "-")
			a, err := strconv.ParseUint(first, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("GTID set %q: interval %q: %w", s, f, err)
			}
			b := a
			if found {
				if b, err = strconv.ParseUint(last, 10, 64); err != nil {
					return nil, fmt.Errorf("GTID set %q: interval %q: %w", s, f, err)
				}
			}
			if b < a {
				return nil, fmt.Errorf("GTID set %q: interval %q ends before it starts", s, f)
			}
			set[key] = append(set[key], interval{a, b})
		}
	}
	for k, ivs := range set {
		set[k] = merge(ivs)
	}
	return set, nil
}

// merge sorts ivs and joins the overlapping and adjacent ones.
func merge(ivs []interval) []interval {
	slices.SortFunc(ivs, func(a, b interval) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	out := ivs[:0]
	for _, iv := range ivs {
		if n := len(out); n > 0 && iv.first <= out[n-1].last+1 {
			out[n-1].last = max(out[n-1].last, iv.last)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// Contains reports whether every transaction of other is in s (MySQL's GTID_SUBSET(other, s)).
func (s GTIDSet) Contains(other GTIDSet) bool {
	for key, ivs := range other {
		have := s[key]
		for _, iv := range ivs {
			if !slices.ContainsFunc(have, func(h interval) bool { return h.first <= iv.first && iv.last <= h.last }) {
				return false
			}
		}
	}
	return true
}

// Union is the transactions of s and of other, a new set (neither is changed).
func (s GTIDSet) Union(other GTIDSet) GTIDSet {
	u := GTIDSet{}
	for _, set := range []GTIDSet{s, other} {
		for key, ivs := range set {
			u[key] = append(u[key], ivs...)
		}
	}
	for key, ivs := range u {
		u[key] = merge(ivs)
	}
	return u
}

// Subtract is the transactions of s that are not in other, a new set (MySQL's
// GTID_SUBTRACT(s, other)).
func (s GTIDSet) Subtract(other GTIDSet) GTIDSet {
	d := GTIDSet{}
	for key, ivs := range s {
		var left []interval
		for _, iv := range ivs {
			rest := []interval{iv}
			for _, o := range other[key] {
				var next []interval
				for _, r := range rest {
					if o.last < r.first || r.last < o.first {
						next = append(next, r)
						continue
					}
					if r.first < o.first {
						next = append(next, interval{r.first, o.first - 1})
					}
					if o.last < r.last {
						next = append(next, interval{o.last + 1, r.last})
					}
				}
				rest = next
			}
			left = append(left, rest...)
		}
		if len(left) > 0 {
			d[key] = left
		}
	}
	return d
}

// sourceUUID is the server UUID of key, a key of a GTIDSet ("uuid" or "uuid:tag").
func sourceUUID(key string) string {
	uuid, _, _ := strings.Cut(key, ":")
	return uuid
}

// String is s in MySQL's text form, its keys sorted: "uuid:1-5:7,uuid:tag:1-3".
func (s GTIDSet) String() string {
	parts := make([]string, 0, len(s))
	for _, key := range slices.Sorted(maps.Keys(s)) {
		part := key
		for _, iv := range s[key] {
			part += ":" + strconv.FormatUint(iv.first, 10)
			if iv.last != iv.first {
				part += "-" + strconv.FormatUint(iv.last, 10)
			}
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ",")
}

// Count is the number of transactions in s.
func (s GTIDSet) Count() uint64 {
	var n uint64
	for _, ivs := range s {
		for _, iv := range ivs {
			n += iv.last - iv.first + 1
		}
	}
	return n
}

// isTag reports whether f is a GTID tag: a letter or underscore, then up to 31 letters,
// digits or underscores.
func isTag(f string) bool {
	if len(f) > 32 {
		return false
	}
	for i, c := range f {
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
