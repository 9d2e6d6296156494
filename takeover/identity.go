package takeover

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/nodelet/nodelet/podrules"
)

// hostView is what a candidate is compared with: the host's root directory and mount namespace.
type hostView struct {
	root os.FileInfo
	// mountNS is the host's mount namespace ("mnt:[<inode>]"); "" when it cannot be known here.
	mountNS string
}

// hostView reads the host's root directory and mount namespace: PID 1's; where PID 1's cannot be read,
// this process's own when it runs in the host's (InHost); else none (the root directory check remains).
func (f Finder) hostView() (hostView, error) {
	root, err := os.Stat(f.root())
	if err != nil {
		return hostView{}, fmt.Errorf("the host's root directory: %w", err)
	}
	ns, pid1Err := os.Readlink(filepath.Join(f.proc(), "1", "ns", "mnt"))
	if pid1Err == nil {
		return hostView{root: root, mountNS: ns}, nil
	}
	if f.InHost {
		own, err := os.Readlink(filepath.Join(f.proc(), "self", "ns", "mnt"))
		if err != nil {
			return hostView{}, fmt.Errorf("this process's mount namespace: %w", err)
		}
		f.Log.Info("PID 1's mount namespace cannot be read: the host's is this process's", "reason", pid1Err.Error(), "mountNamespace", own)
		return hostView{root: root, mountNS: own}, nil
	}
	f.Log.Info("PID 1's mount namespace cannot be read: mount namespaces are not compared, root directories are", "reason", pid1Err.Error())
	return hostView{root: root}, nil
}

// identityCheck is one thing a process in a pod cannot forge about the host's kubelet.
type identityCheck struct {
	name string
	run  func(f Finder, dir string, host hostView) error
}

// identityChecks are run on every candidate (dir is its /proc directory).
var identityChecks = []identityCheck{
	{"executable", Finder.checkExecutable},
	{"cgroup", Finder.checkCgroup},
	{"root directory", Finder.checkRootDir},
	{"mount namespace", Finder.checkMountNS},
}

// identify runs every identity check on the process pid; the error names each failed check.
func (f Finder) identify(pid int, host hostView) error {
	dir := filepath.Join(f.proc(), strconv.Itoa(pid))
	var failed checkFailures
	for _, c := range identityChecks {
		if err := c.run(f, dir, host); err != nil {
			failed = append(failed, fmt.Errorf("%s check: %w", c.name, err))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return failed
}

// checkFailures are the failed checks of one process.
type checkFailures []error

func (c checkFailures) Error() string {
	msgs := make([]string, len(c))
	for i, err := range c {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (c checkFailures) Unwrap() []error { return c }

// checkExecutable: the path the process's executable link gives (its path in the process's own mount
// namespace) names, in the host's view, the very file the process runs (same device and inode), and that
// file and every directory above it are owned by root and writable by no one else.
func (f Finder) checkExecutable(dir string, _ hostView) error {
	link := filepath.Join(dir, "exe")
	target, err := os.Readlink(link)
	if err != nil {
		return err
	}
	if strings.HasSuffix(target, deletedSuffix) || !filepath.IsAbs(target) || filepath.Clean(target) != target {
		return fmt.Errorf("%s is not a file in any file system (removed since it started, or outside the process's root)", target)
	}
	running, err := f.stat(link)
	if err != nil {
		return err
	}
	onHost, err := os.Stat(filepath.Join(f.root(), target))
	if err != nil {
		return fmt.Errorf("%s is not in the host's file system: %w", target, err)
	}
	if !os.SameFile(running, onHost) {
		return fmt.Errorf("the process runs another file than the host's %s", target)
	}
	return f.checkRootOwned(target)
}

func (f Finder) stat(name string) (os.FileInfo, error) {
	if f.statExe != nil {
		return f.statExe(name)
	}
	return os.Stat(name)
}

// checkRootOwned: the host's root directory, each directory on target and target itself are owned by root
// (owner) and not writable by group or others, and none is a symbolic link (the executable link's path has
// none).
func (f Finder) checkRootOwned(target string) error {
	p := f.root()
	parts := strings.Split(strings.TrimPrefix(target, "/"), "/")
	for i := -1; i < len(parts); i++ {
		shown := "/"
		if i >= 0 {
			p = filepath.Join(p, parts[i])
			shown = "/" + path.Join(parts[:i+1]...)
		}
		if err := f.checkOwnedEntry(p, shown, i == len(parts)-1); err != nil {
			return err
		}
	}
	return nil
}

// checkOwnedEntry checks one entry of checkRootOwned: a directory, or the regular file last.
func (f Finder) checkOwnedEntry(p, shown string, last bool) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link", shown)
	case last && !fi.Mode().IsRegular(), !last && !fi.IsDir():
		return fmt.Errorf("%s is a %v", shown, fi.Mode().Type())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by group or others (%v)", shown, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != f.owner {
		return fmt.Errorf("%s is not owned by uid %d", shown, f.owner)
	}
	return nil
}

// checkCgroup: no hierarchy puts the process in the pods' cgroup tree.
func (f Finder) checkCgroup(dir string, _ hostView) error {
	raw, err := os.ReadFile(filepath.Join(dir, "cgroup"))
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), ":", 3)
		if len(fields) != 3 {
			continue
		}
		if err := podsCgroupTree(fields[2]); err != nil {
			return err
		}
	}
	return sc.Err()
}

// The pods' cgroup tree's top directory, as the kubelet names it with each driver: kubepods (cgroupfs),
// kubepods.slice (systemd), <root>-kubepods.slice (systemd, below a --cgroup-root slice).
var (
	podsCgroupfs = path.Base(podrules.CgroupName{podrules.KubepodsCgroup}.ToCgroupfs())
	podsSlice    = path.Base(podrules.CgroupName{podrules.KubepodsCgroup}.ToSystemd())
)

// podsCgroupTree is an error when the cgroup path p (as /proc/<pid>/cgroup gives it) is in the pods' tree,
// or cannot be placed: outside this process's cgroup namespace, the path shows only "..".
func podsCgroupTree(p string) error {
	for _, seg := range strings.Split(p, "/") {
		switch {
		case seg == "..":
			return fmt.Errorf("cgroup %s is outside this process's cgroup namespace: it cannot be placed", p)
		case seg == podsCgroupfs, seg == podsSlice, strings.HasSuffix(seg, "-"+podsSlice):
			return fmt.Errorf("cgroup %s is in the pods' cgroup tree", p)
		}
	}
	return nil
}

// checkRootDir: the process's root directory is the host's.
func (f Finder) checkRootDir(dir string, host hostView) error {
	root, err := os.Stat(filepath.Join(dir, "root"))
	if err != nil {
		return err
	}
	if !os.SameFile(root, host.root) {
		return errors.New("its root directory is not the host's")
	}
	return nil
}

// checkMountNS: the process's mount namespace is the host's (when the host's is known here).
func (f Finder) checkMountNS(dir string, host hostView) error {
	if host.mountNS == "" {
		return nil
	}
	ns, err := os.Readlink(filepath.Join(dir, "ns", "mnt"))
	if err != nil {
		return err
	}
	if ns != host.mountNS {
		return fmt.Errorf("mount namespace %s is not the host's %s", ns, host.mountNS)
	}
	return nil
}
