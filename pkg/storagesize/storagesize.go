// Package storagesize parses spec.storage, the volume size of each replica of a Database,
// written in whole gibibytes ("100Gi"). The API server's validation and the controller both
// read the field with it, so the two agree on every value.
package storagesize

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Pattern is the form of spec.storage: whole gibibytes, e.g. "100Gi".
const Pattern = `^[0-9]+Gi$`

// MaxGi is the largest spec.storage, in gibibytes, whose size in bytes still fits an int64,
// as resource.Quantity and PersistentVolumeClaim requests need.
const MaxGi int64 = 1<<33 - 1

var storageRegexp = regexp.MustCompile(Pattern)

// Parse returns the size storage names, in gibibytes ("100Gi" → 100). It returns an error
// when storage does not match Pattern or exceeds MaxGi. "0Gi" parses to 0: whether zero is
// allowed is the caller's rule.
func Parse(storage string) (int64, error) {
	if !storageRegexp.MatchString(storage) {
		return 0, fmt.Errorf("storage %q does not match %s", storage, Pattern)
	}
	digits := strings.TrimLeft(strings.TrimSuffix(storage, "Gi"), "0")
	if digits == "" {
		return 0, nil
	}
	gi, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || gi > MaxGi {
		return 0, fmt.Errorf("storage %q exceeds %dGi", storage, MaxGi)
	}
	return gi, nil
}

// Canonical returns storage in its canonical form, without leading zeros ("0100Gi" →
// "100Gi"), so equal sizes are equal strings. A storage that Parse refuses is returned
// unchanged for validation to report.
func Canonical(storage string) string {
	gi, err := Parse(storage)
	if err != nil {
		return storage
	}
	return strconv.FormatInt(gi, 10) + "Gi"
}
