package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// startupLimit bounds the wait for the agent's binary to reach its first write.
const startupLimit = 20 * time.Second

// startupMemory is what an agent's binary holds resident once its package initializers have run and before it
// does any work: the binary is run with --version, its standard output a pipe filled beforehand, so that the
// process blocks in its first write (the version line) and its RSS can be read there. It is the floor under
// the agent's idle RSS that the libraries it links set. The process is let go (the pipe drained) afterwards.
func startupMemory(ctx context.Context, exe string) (memory, error) {
	var m memory
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil { // blocking ends: the child's write must block
		return m, fmt.Errorf("pipe: %w", err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "startup-r"), os.NewFile(uintptr(fds[1]), "startup-w")
	defer func() { _ = r.Close() }()
	fill := make([]byte, pipeCapacity(fds[1]))
	if _, err := w.Write(fill); err != nil {
		_ = w.Close()
		return m, fmt.Errorf("fill pipe: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, "--version")
	cmd.Stdout = w
	cmd.Env = []string{}
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		return m, err
	}
	_ = w.Close()
	drained := make(chan struct{})
	defer func() {
		go func() { _, _ = io.Copy(io.Discard, r); close(drained) }()
		_ = cmd.Wait()
		<-drained
	}()
	pid := strconv.Itoa(cmd.Process.Pid)
	deadline := time.Now().Add(startupLimit)
	for !blockedOnPipe(pid) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return m, fmt.Errorf("%s --version did not reach its first write in %s", exe, startupLimit)
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			_ = cmd.Process.Kill()
			return m, err
		}
	}
	return residentMemory(pid)
}

// pipeCapacity is the pipe's buffer size (F_GETPIPE_SZ), or Linux's default of 64 KiB.
func pipeCapacity(fd int) int {
	const fGetPipeSz = 1032
	if n, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), fGetPipeSz, 0); errno == 0 && n > 0 {
		return int(n)
	}
	return 64 << 10
}

// blockedOnPipe tells whether a thread of the process sleeps in a write to its standard output
// (/proc/<pid>/task/<tid>/syscall: the system call's number and first argument, the file descriptor).
func blockedOnPipe(pid string) bool {
	tasks, err := filepath.Glob("/proc/" + pid + "/task/*/syscall")
	if err != nil {
		return false
	}
	want := strconv.Itoa(syscall.SYS_WRITE) + " 0x1 "
	for _, t := range tasks {
		if b, err := os.ReadFile(t); err == nil && strings.HasPrefix(string(b), want) {
			return true
		}
	}
	return false
}

// agentExecutable is the file the process runs.
func agentExecutable(pid string) (string, error) {
	exe, err := os.Readlink("/proc/" + pid + "/exe")
	if err != nil {
		return "", err
	}
	if strings.HasSuffix(exe, " (deleted)") {
		return "", errors.New(exe + ": the agent's binary was replaced since it started")
	}
	return exe, nil
}
