package takeover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
)

// KubeletUnit is the systemd unit the kubelet runs as (kubeadm's packages, kind's node image).
const KubeletUnit = "kubelet.service"

// UnitMainPID is systemd's view of a unit's main process (SystemdUnits over D-Bus).
type UnitMainPID interface {
	// MainPID is the unit's main PID (0 when it runs none); loaded is false when systemd has no such unit;
	// the error is ErrNoSystemd when systemd does not run.
	MainPID(ctx context.Context, unit string) (pid int, loaded bool, err error)
}

// Finder finds the host's running kubelet among the host's processes (the takeover pod has the host's PID
// namespace, so processes of every pod are among them too). Find says the rule.
type Finder struct {
	// Proc is the host's procfs (default "/proc").
	Proc string
	// Root is the host's "/" as this process sees it (default "/": in the host's mount namespace, or
	// changed root to the host's).
	Root string
	// InHost says this process runs in the host's mount namespace: its own is then the host's when PID 1's
	// cannot be read.
	InHost bool
	// Systemd tells the kubelet unit's main PID; nil: not asked.
	Systemd UnitMainPID
	Log     logr.Logger

	// owner must own the kubelet's executable and the directories above it (root; tests: their own user).
	owner int
	// statExe stats /proc/<pid>/exe (os.Stat; tests resolve their fake link in the process's root).
	statExe func(name string) (os.FileInfo, error)
}

// Kubelet is a running kubelet, as seen in /proc.
type Kubelet struct {
	PID  int
	Args []string // the command line without argv[0]
}

// candidate is a process named kubelet.
type candidate struct {
	pid  int
	argv []string
}

// Find returns the host's running kubelet; ok is false when no process is named kubelet.
//
// A candidate is a process other than this one whose argv[0] or executable has the base name "kubelet".
// A name proves nothing: any container can start a process with argv[0] "kubelet" (`exec -a kubelet`), and
// the kubelet found is the one whose mount namespace nodelet enters and whose flags it runs with. So each
// candidate must pass checks that a process in a pod cannot forge (identityChecks): its executable is the
// host's file, owned by root on a path only root can write; it is not in the pods' cgroup tree; its root
// directory and mount namespace are the host's. A candidate failing any of them is not the kubelet: it is
// logged with its PID and the failed checks and left out, so that a pod's impostor can neither be taken for
// the kubelet nor stop the real one from being found. Then:
//   - candidates but none passing: an error naming each PID and the checks it failed (never a guess, and
//     not kubeadm's files either: something named kubelet runs);
//   - two or more passing: an error naming them (which one runs the node cannot be told);
//   - exactly one: where systemd runs a kubelet.service, its main PID must be that process (else an error);
//     without systemd, or without that unit, this check is skipped and a log line says so.
func (f Finder) Find(ctx context.Context) (k Kubelet, ok bool, err error) {
	cands, err := f.candidates()
	if err != nil || len(cands) == 0 {
		return k, false, err
	}
	host, err := f.hostView()
	if err != nil {
		return k, false, err
	}
	var passed []candidate
	var rejected []rejection
	for _, c := range cands {
		if err := f.identify(c.pid, host); err != nil {
			rejected = append(rejected, rejection{pid: c.pid, err: err})
			continue
		}
		passed = append(passed, c)
	}
	if len(passed) != 1 {
		return k, false, notOne(passed, rejected)
	}
	c := passed[0]
	if err := f.checkSystemd(ctx, c.pid); err != nil {
		return k, false, fmt.Errorf("the kubelet candidate (pid %d) fails the systemd check: %w", c.pid, err)
	}
	for _, r := range rejected {
		f.Log.Info("Rejected a process named kubelet: not the host's kubelet", "pid", r.pid, "failedChecks", r.err.Error())
	}
	f.Log.Info("Found the host's kubelet", "pid", c.pid, "rejected", len(rejected))
	return Kubelet{PID: c.pid, Args: c.argv[1:]}, true, nil
}

// rejection is a candidate that failed an identity check.
type rejection struct {
	pid int
	err error
}

// notOne is the error when not exactly one candidate passed the identity checks.
func notOne(passed []candidate, rejected []rejection) error {
	if len(passed) > 1 {
		pids := make([]string, len(passed))
		for i, c := range passed {
			pids[i] = strconv.Itoa(c.pid)
		}
		return fmt.Errorf("%d processes pass as the host's kubelet (pids %s): cannot tell which one runs the node",
			len(passed), strings.Join(pids, ", "))
	}
	parts := make([]string, len(rejected))
	for i, r := range rejected {
		parts[i] = fmt.Sprintf("pid %d: %v", r.pid, r.err)
	}
	return fmt.Errorf("no process named kubelet is the host's kubelet (%s)", strings.Join(parts, "; "))
}

// candidates are the processes named kubelet under Proc.
func (f Finder) candidates() ([]candidate, error) {
	entries, err := os.ReadDir(f.proc())
	if err != nil {
		return nil, err
	}
	var found []candidate
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join(f.proc(), e.Name())
		argv := readArgv(filepath.Join(dir, "cmdline"))
		exe, _ := os.Readlink(filepath.Join(dir, "exe")) // none for kernel threads
		if len(argv) == 0 && exe == "" {
			continue // gone, or a kernel thread
		}
		if len(argv) == 0 {
			argv = []string{""} // a command line wiped by the process itself
		}
		if filepath.Base(argv[0]) == kubeletName || filepath.Base(strings.TrimSuffix(exe, deletedSuffix)) == kubeletName {
			found = append(found, candidate{pid: pid, argv: argv})
		}
	}
	return found, nil
}

const (
	kubeletName = "kubelet"
	// deletedSuffix ends the link of an executable that was removed (or replaced) since it started.
	deletedSuffix = " (deleted)"
)

// readArgv is a process's command line (nil for a kernel thread or a process gone).
func readArgv(path string) []string {
	raw, err := os.ReadFile(path)
	if err != nil || len(raw) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
}

func (f Finder) proc() string {
	if f.Proc == "" {
		return "/proc"
	}
	return f.Proc
}

func (f Finder) root() string {
	if f.Root == "" {
		return "/"
	}
	return f.Root
}

// checkSystemd: where systemd runs the kubelet unit, its main PID is pid.
func (f Finder) checkSystemd(ctx context.Context, pid int) error {
	if f.Systemd == nil {
		f.Log.Info("Systemd is not asked: the kubelet unit's main PID is not checked", "pid", pid)
		return nil
	}
	mainPID, loaded, err := f.Systemd.MainPID(ctx, KubeletUnit)
	switch {
	case errors.Is(err, ErrNoSystemd):
		f.Log.Info("Systemd does not run: the kubelet unit's main PID is not checked", "pid", pid)
		return nil
	case err != nil:
		return fmt.Errorf("ask systemd for %s's main PID: %w", KubeletUnit, err)
	case !loaded:
		f.Log.Info("Systemd has no kubelet unit: its main PID is not checked", "unit", KubeletUnit, "pid", pid)
		return nil
	case mainPID != pid:
		return fmt.Errorf("systemd's %s runs main PID %d, not %d", KubeletUnit, mainPID, pid)
	}
	return nil
}
