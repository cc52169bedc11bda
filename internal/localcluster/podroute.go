package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The simulated node's Pods get addresses from podCIDR (kwok hands them out) and nothing
// answers at them. Without a route of their own, a connection to one (the controller asks the
// server of every running member of a Database for its state) leaves the machine by its
// default route and waits out its timeout, 5 s per pass. As root, a cluster makes podCIDR
// unreachable from the host while it runs: an `unreachable` route, so such a connection fails
// at once with EHOSTUNREACH and nothing leaves the machine. The real node's Pods have their own
// range (realNodePodCIDR) on its bridge and are not affected. Without root, or when another
// kind of route covers podCIDR exactly, nothing is changed.
//
// Clusters of several processes (go test runs packages side by side) share the one route: each
// running cluster holds a claim file in podRouteDir, named after its process, and the last
// claim to go removes the route. A claim of a process that is gone (a killed run) counts for
// nothing. The claims and the route change under an exclusive flock of podRouteDir's lock file.

// podRouteDir holds the claims on the route. It is under /run, which a reboot empties, as it
// does the routes.
const podRouteDir = "/run/database-apiserver-localcluster"

// blockPodCIDR adds the unreachable route for podCIDR, or takes over the one another cluster
// made (running or killed), and returns this cluster's claim on it, the path unblockPodCIDR
// takes; "" when it changed nothing (not root, no `ip` command, another kind of route for
// podCIDR, an error: each is logged but the last two).
func blockPodCIDR(logf func(string, ...any)) string {
	if os.Geteuid() != 0 {
		return ""
	}
	const what = "simulated Pods' addresses"
	unlock, err := lockPodRoutes()
	if err != nil {
		logf("%-28s not blocked: %v", what, err)
		return ""
	}
	defer unlock()
	out, err := exec.Command("ip", "-4", "route", "show", "exact", podCIDR).Output()
	if err != nil {
		return ""
	}
	switch existing := strings.TrimSpace(string(out)); {
	case strings.HasPrefix(existing, "unreachable "):
	case existing != "":
		logf("%-28s left as routed: %s", what, existing)
		return ""
	default:
		if err := run("ip", "-4", "route", "add", "unreachable", podCIDR); err != nil {
			logf("%-28s not blocked: %v", what, err)
			return ""
		}
	}
	f, err := os.CreateTemp(podRouteDir, fmt.Sprintf("%d-*.claim", os.Getpid()))
	if err != nil {
		logf("%-28s blocked, but its claim was not written (the route stays): %v", what, err)
		return ""
	}
	_ = f.Close()
	return f.Name()
}

// unblockPodCIDR drops claim (blockPodCIDR's) and removes the route when no claim of a running
// process is left.
func unblockPodCIDR(claim string) {
	unlock, err := lockPodRoutes()
	if err != nil {
		return
	}
	defer unlock()
	_ = os.Remove(claim)
	if others, err := liveClaims(podRouteDir); err == nil && others == 0 {
		_ = run("ip", "-4", "route", "del", "unreachable", podCIDR)
	}
}

// lockPodRoutes takes the exclusive flock on podRouteDir's lock file (making the directory)
// and returns its release.
func lockPodRoutes() (func(), error) {
	if err := os.MkdirAll(podRouteDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(podRouteDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}

// liveClaims counts the claims in dir (files <pid>-*.claim) whose process is running, and
// removes the others.
func liveClaims(dir string) (int, error) {
	claims, err := filepath.Glob(filepath.Join(dir, "*.claim"))
	if err != nil {
		return 0, err
	}
	live := 0
	for _, claim := range claims {
		pid, err := strconv.Atoi(strings.SplitN(filepath.Base(claim), "-", 2)[0])
		if err == nil && pid > 0 && processRuns(pid) {
			live++
			continue
		}
		_ = os.Remove(claim)
	}
	return live, nil
}

// processRuns reports whether a process of that pid exists (signal 0 reaches it, or it is
// another user's).
func processRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
