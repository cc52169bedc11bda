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

// PrimaryTakesWrites reports whether db's status says its primary takes writes: a primary is
// named, the controller's last check found its server answering as the primary (its
// status.members entry has role primary), and no check found it not taking writes since
// (status.primaryLastWritableTime unset). A primary whose server has not answered yet (it
// is starting, or its node runs no server) does not.
func PrimaryTakesWrites(db *Database) bool {
	if db.Status.Primary == "" || db.Status.PrimaryLastWritableTime != nil {
		return false
	}
	for _, m := range db.Status.Members {
		if m.Name == db.Status.Primary {
			return m.Role == MemberRolePrimary
		}
	}
	return false
}
