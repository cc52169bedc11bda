package localcluster

import (
	"os"
	"os/exec"
	"strings"
)

// The simulated node's Pods get addresses from podCIDR (kwok hands them out) and nothing
// answers at them. Without a route of their own, a connection to one (the controller asks the
// server of every running member of a Database for its state) leaves the machine by its
// default route and waits out its timeout, 5 s per pass. As root, the cluster makes podCIDR
// unreachable from the host while it runs: an `unreachable` route, so such a connection fails
// at once with EHOSTUNREACH and nothing leaves the machine. The real node's Pods have their own
// range (realNodePodCIDR) on its bridge and are not affected. Without root, or when another
// route covers podCIDR exactly, nothing is changed.

// blockPodCIDR adds the unreachable route for podCIDR, or adopts one a cluster killed before
// its Stop left, and reports whether the route is this cluster's to remove (unblockPodCIDR).
// It returns false when it may not change routes (not root, no `ip` command) or when another
// kind of route for podCIDR is there.
func blockPodCIDR(logf func(string, ...any)) bool {
	if os.Geteuid() != 0 {
		return false
	}
	out, err := exec.Command("ip", "-4", "route", "show", "exact", podCIDR).Output()
	if err != nil {
		return false
	}
	switch existing := strings.TrimSpace(string(out)); {
	case strings.HasPrefix(existing, "unreachable "):
		return true
	case existing != "":
		logf("%-28s left as routed: %s", "simulated Pods' addresses", existing)
		return false
	}
	if err := run("ip", "-4", "route", "add", "unreachable", podCIDR); err != nil {
		logf("%-28s not blocked: %v", "simulated Pods' addresses", err)
		return false
	}
	return true
}

// unblockPodCIDR removes the unreachable route blockPodCIDR added.
func unblockPodCIDR() {
	_ = run("ip", "-4", "route", "del", "unreachable", podCIDR)
}
