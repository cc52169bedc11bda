package example

import (
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/database-apiserver/pkg/storagesize"
)

// CanonicalStorage returns spec.storage in its canonical form (storagesize.Canonical):
// without leading zeros, so equal sizes are equal strings.
func CanonicalStorage(storage string) string { return storagesize.Canonical(storage) }

// PodName returns the name of the database Pod of ordinal in the Database
// name: "<name>-<ordinal>", as a StatefulSet named after the Database names its Pods.
func PodName(name string, ordinal int32) string {
	return name + "-" + strconv.FormatInt(int64(ordinal), 10)
}

// PodOrdinal returns the ordinal of the database Pod pod of the Database name,
// and true, when pod is exactly "<name>-<n>" with n a decimal int32 of no
// leading zeros (the form PodName writes); otherwise 0 and false.
func PodOrdinal(name, pod string) (int32, bool) {
	digits, ok := strings.CutPrefix(pod, name+"-")
	if !ok || digits == "" || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(digits, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// RequestedPrimary is the Pod db's spec.primary asks to be the primary, or "" when it asks
// for none or was asked before the last automatic failover (status.lastFailoverTime): the
// last request to move the primary (status.switchover.requestedAt, or none recorded)
// predates it, so the controller keeps the replica it promoted rather than move the
// primary back to the Pod that failed.
func RequestedPrimary(db *Database) string {
	if f := db.Status.LastFailoverTime; f != nil {
		if s := db.Status.Switchover; s == nil || s.RequestedAt.Before(f) {
			return ""
		}
	}
	return db.Spec.Primary
}

// RequestTime is when the API server records a request to move the primary made at now
// (status.switchover.requestedAt): now, or one second after status.lastFailoverTime when
// that is later, so a request accepted once a failover is recorded counts as asked after it
// (RequestedPrimary) whatever the API server's and the controller's clocks say. Times are
// to the second, as the API serialises them.
func RequestTime(now time.Time, status *DatabaseStatus) metav1.Time {
	at := metav1.NewTime(now).Rfc3339Copy()
	if f := status.LastFailoverTime; f != nil {
		if after := metav1.NewTime(f.Add(time.Second)).Rfc3339Copy(); at.Before(&after) {
			return after
		}
	}
	return at
}
