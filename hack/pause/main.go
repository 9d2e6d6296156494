// Command pause is the test bed's sandbox (infra) container process. It is PID 1 of a pod sandbox: it sleeps
// until SIGTERM or SIGINT, reaps every child that exits meanwhile (orphans are re-parented to it), and exits 0.
// Build it static: CGO_ENABLED=0 go build ./hack/pause.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-v" || os.Args[1] == "--version") {
		fmt.Println("pause (nodelet test bed)")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		reap()
		os.Exit(0)
	}
}

// reap collects every exited child without blocking; one SIGCHLD may stand for many exits.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
