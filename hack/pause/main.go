// Command pause is the local cluster's Pod sandbox process (containerd's sandbox_image): it
// holds the Pod's namespaces open until it is told to stop. As PID 1 of the sandbox it reaps
// every orphan re-parented to it, and it exits 0 on SIGINT or SIGTERM. It takes no arguments.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every child that has exited; WNOHANG returns 0 once none is left.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
