package example

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// StoragePattern is the form of spec.storage: whole gibibytes, e.g. "100Gi".
const StoragePattern = `^[0-9]+Gi$`

// MaxStorageGi is the largest spec.storage, in gibibytes, whose size in bytes
// still fits an int64, as resource.Quantity and PersistentVolumeClaim
// requests need.
const MaxStorageGi int64 = 1<<33 - 1

var storageRegexp = regexp.MustCompile(StoragePattern)

// ParseStorage returns the size spec.storage names, in gibibytes ("100Gi" →
// 100). It returns an error when storage does not match StoragePattern or
// exceeds MaxStorageGi. "0Gi" parses to 0: whether zero is allowed is the
// caller's rule.
func ParseStorage(storage string) (int64, error) {
	if !storageRegexp.MatchString(storage) {
		return 0, fmt.Errorf("storage %q does not match %s", storage, StoragePattern)
	}
	digits := strings.TrimLeft(strings.TrimSuffix(storage, "Gi"), "0")
	if digits == "" {
		return 0, nil
	}
	gi, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || gi > MaxStorageGi {
		return 0, fmt.Errorf("storage %q exceeds %dGi", storage, MaxStorageGi)
	}
	return gi, nil
}

// CanonicalStorage returns storage in its canonical form, without leading
// zeros ("0100Gi" → "100Gi"), so equal sizes are equal strings. A storage
// that ParseStorage refuses is returned unchanged for validation to report.
func CanonicalStorage(storage string) string {
	gi, err := ParseStorage(storage)
	if err != nil {
		return storage
	}
	return strconv.FormatInt(gi, 10) + "Gi"
}
