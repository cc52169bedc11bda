package v1

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
