package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The simulated node's Pods get addresses from podCIDR (kwok hands them out) and nothing
// answers at them. Without a route of their own, a connection to one (the controller asks the
// server of every running member of a Database for its state) leaves the machine by its
// default route and waits out its timeout, 5 s per pass. As root, a cluster makes podCIDR
// unreachable from the host while it runs: an `unreachable` route, so such a connection fails
// at once with EHOSTUNREACH and nothing leaves the machine. The real node's Pods have their own
// range (realNodePodCIDR) on its bridge and are not affected. Without root, or when a route for
// podCIDR that no cluster made is there, nothing is changed.
//
// Clusters of several processes (go test runs packages side by side) share the one route: each
// running cluster holds a claim, a file in podRouteDir it keeps open under an exclusive flock,
// and the last claim to go removes the route. The kernel drops the lock of a process that dies,
// so a claim left by a killed run counts for nothing; its file is removed by the next cluster
// to start or stop, which then takes the route over or removes it. The claims and the route
// change under an exclusive flock of podRouteDir's lock file. An `unreachable` route for
// podCIDR with no claim file beside it is someone else's, and is left alone.

// podRouteDir holds the claims on the route. It is under /run, which a reboot empties, as it
// does the routes.
const podRouteDir = "/run/database-apiserver-localcluster"

const podRouteWhat = "simulated Pods' addresses"

// blockPodCIDR adds the unreachable route for podCIDR, or takes over the one another cluster
// made (running or killed), and returns this cluster's claim on it, for unblockPodCIDR; nil
// when it changed nothing: not root (silently), no `ip` command, a route for podCIDR that is
// not ours, or an error (each logged).
func blockPodCIDR(logf func(string, ...any)) *os.File {
	if os.Geteuid() != 0 {
		return nil
	}
	if _, err := exec.LookPath("ip"); err != nil {
		logf("%-28s not blocked: %v", podRouteWhat, err)
		return nil
	}
	unlock, err := lockPodRoutes()
	if err != nil {
		logf("%-28s not blocked: %v", podRouteWhat, err)
		return nil
	}
	defer unlock()
	held, stale, err := podRouteClaims(podRouteDir)
	if err != nil {
		logf("%-28s not blocked: %v", podRouteWhat, err)
		return nil
	}
	out, err := exec.Command("ip", "-4", "route", "show", "exact", podCIDR).Output()
	if err != nil {
		logf("%-28s not blocked: ip route show: %v", podRouteWhat, err)
		return nil
	}
	switch existing := strings.TrimSpace(string(out)); {
	case strings.HasPrefix(existing, "unreachable ") && held+stale > 0:
		// A cluster's, running or killed.
	case existing != "":
		logf("%-28s left as routed: %s", podRouteWhat, existing)
		return nil
	default:
		if err := run("ip", "-4", "route", "add", "unreachable", podCIDR); err != nil {
			logf("%-28s not blocked: %v", podRouteWhat, err)
			return nil
		}
	}
	claim, err := os.CreateTemp(podRouteDir, fmt.Sprintf("%d-*.claim", os.Getpid()))
	if err == nil {
		if err = syscall.Flock(int(claim.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = os.Remove(claim.Name())
			_ = claim.Close()
		}
	}
	if err != nil {
		logf("%-28s blocked, but without a claim (the route stays after this cluster): %v", podRouteWhat, err)
		return nil
	}
	return claim
}

// unblockPodCIDR drops claim (blockPodCIDR's) and removes the route when no other claim is
// held.
func unblockPodCIDR(claim *os.File) {
	unlock, err := lockPodRoutes()
	if err != nil {
		return
	}
	defer unlock()
	_ = os.Remove(claim.Name())
	_ = claim.Close()
	if held, _, err := podRouteClaims(podRouteDir); err == nil && held == 0 {
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

// podRouteClaims counts the claims in dir (files *.claim) that a running cluster holds locked,
// and the stale ones, which it removes.
func podRouteClaims(dir string) (held, stale int, err error) {
	claims, err := filepath.Glob(filepath.Join(dir, "*.claim"))
	if err != nil {
		return 0, 0, err
	}
	for _, path := range claims {
		f, err := os.Open(path)
		if err != nil {
			continue // removed meanwhile
		}
		switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
		case errors.Is(err, syscall.EWOULDBLOCK):
			held++
		case err == nil:
			stale++
			_ = os.Remove(path)
		}
		_ = f.Close()
	}
	return held, stale, nil
}
