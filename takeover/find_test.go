package takeover

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// hostNS is the host's mount namespace in the fake /proc.
const hostNS = "mnt:[4026531840]"

// fakeHost is a fake /proc (proc/) beside the host's file system as the takeover sees it (host/), and the
// root file systems of containers (containers/<pid>/).
type fakeHost struct {
	t    *testing.T
	dir  string
	proc string
	root string
}

func newFakeHost(t *testing.T) *fakeHost {
	t.Helper()
	dir := t.TempDir()
	h := &fakeHost{t: t, dir: dir, proc: filepath.Join(dir, "proc"), root: filepath.Join(dir, "host")}
	h.file("host/usr/bin/kubelet", 0o755)
	h.file("host/bin/sleep", 0o755) // the host's coreutils
	for _, d := range []string{"host", "host/usr", "host/usr/bin", "host/bin"} {
		h.chmod(d, 0o755)
	}
	h.link("proc/1/ns/mnt", hostNS)
	h.link("proc/self/ns/mnt", hostNS)
	writeFile(t, filepath.Join(h.proc, "2", "cmdline"), "") // a kernel thread
	return h
}

func (h *fakeHost) file(rel string, mode os.FileMode) {
	h.t.Helper()
	writeFile(h.t, filepath.Join(h.dir, rel), "\x7fELF")
	h.chmod(rel, mode)
}

func (h *fakeHost) chmod(rel string, mode os.FileMode) {
	h.t.Helper()
	if err := os.Chmod(filepath.Join(h.dir, rel), mode); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) link(rel, target string) {
	h.t.Helper()
	p := filepath.Join(h.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		h.t.Fatal(err)
	}
}

// fakeProcess is a process in the fake /proc.
type fakeProcess struct {
	pid    int
	argv   []string
	exe    string // the executable's path as the process sees it (the exe link)
	root   string // its root directory under the fake tree: "host" or a container's
	cgroup string // /proc/<pid>/cgroup
	mntNS  string
}

func (h *fakeHost) start(p fakeProcess) {
	h.t.Helper()
	d := filepath.Join("proc", strconv.Itoa(p.pid))
	writeFile(h.t, filepath.Join(h.dir, d, "cmdline"), strings.Join(p.argv, "\x00")+"\x00")
	writeFile(h.t, filepath.Join(h.dir, d, "cgroup"), p.cgroup)
	h.link(filepath.Join(d, "exe"), p.exe)
	h.link(filepath.Join(d, "root"), filepath.Join(h.dir, p.root))
	h.link(filepath.Join(d, "ns", "mnt"), p.mntNS)
}

// kubelet is the host's kubelet (/usr/bin/kubelet, systemd's kubelet.service cgroup, the host's mount namespace).
func kubelet(pid int, args ...string) fakeProcess {
	return fakeProcess{pid: pid, argv: append([]string{"/usr/bin/kubelet"}, args...), exe: "/usr/bin/kubelet", root: "host",
		cgroup: "12:memory:/system.slice/kubelet.service\n0::/system.slice/kubelet.service\n", mntNS: hostNS}
}

// impostor is `exec -a kubelet sleep 3600` in a pod's busybox container: argv[0] kubelet, its executable
// busybox as the container's /bin/sleep, in the pods' cgroup tree and the container's mount namespace.
func (h *fakeHost) impostor(pid int) fakeProcess {
	rootfs := "containers/" + strconv.Itoa(pid)
	h.file(rootfs+"/bin/sleep", 0o755)
	return fakeProcess{pid: pid, argv: []string{"kubelet", "3600"}, exe: "/bin/sleep", root: rootfs,
		cgroup: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1a2b.slice/cri-containerd-abc.scope\n",
		mntNS:  "mnt:[4026532999]"}
}

// finder finds in the fake; its log lines go to lines.
func (h *fakeHost) finder(lines *[]string) Finder {
	return Finder{Proc: h.proc, Root: h.root, Log: logTo(lines), owner: os.Geteuid(), statExe: h.statExe}
}

// statExe stats an exe link as the kernel does: its path resolved in the process's own root directory.
func (h *fakeHost) statExe(name string) (os.FileInfo, error) {
	target, err := os.Readlink(name)
	if err != nil {
		return nil, err
	}
	return os.Stat(filepath.Join(filepath.Dir(name), "root", target))
}

func logTo(lines *[]string) logr.Logger {
	return funcr.New(func(prefix, args string) { *lines = append(*lines, args) }, funcr.Options{})
}

func TestFindTheKubeletAlone(t *testing.T) {
	h := newFakeHost(t)
	h.start(kubelet(812, "--config=/var/lib/kubelet/config.yaml"))
	h.start(fakeProcess{pid: 900, argv: []string{"/usr/bin/containerd"}, exe: "/usr/bin/containerd", root: "host",
		cgroup: "0::/system.slice/containerd.service\n", mntNS: hostNS})
	var lines []string
	k, ok, err := h.finder(&lines).Find(context.Background())
	if err != nil || !ok || k.PID != 812 || !slices.Equal(k.Args, []string{"--config=/var/lib/kubelet/config.yaml"}) {
		t.Fatalf("Find = %+v, %v, %v; want pid 812 with its flags", k, ok, err)
	}
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, `"pid"=812`) }) {
		t.Errorf("no log line names the kubelet found: %q", lines)
	}
}

func TestFindRejectsAnImpostorAlone(t *testing.T) {
	h := newFakeHost(t)
	h.start(h.impostor(4242))
	var lines []string
	k, ok, err := h.finder(&lines).Find(context.Background())
	if err == nil || ok {
		t.Fatalf("Find = %+v, %v, nil; want an error", k, ok)
	}
	for _, want := range []string{"pid 4242", "executable check: the process runs another file than the host's /bin/sleep",
		"cgroup check", "pods' cgroup tree", "root directory check", "mount namespace check"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestFindTheKubeletBesideAnImpostor(t *testing.T) {
	for name, impostor := range map[string]func(h *fakeHost) fakeProcess{
		"exec -a kubelet sleep": func(h *fakeHost) fakeProcess { return h.impostor(4242) },
		"a kubelet of its own at a path the host lacks": func(h *fakeHost) fakeProcess {
			p := h.impostor(4242)
			h.file("containers/4242/tmp/kubelet", 0o755)
			p.argv, p.exe = []string{"/tmp/kubelet"}, "/tmp/kubelet"
			return p
		},
		// Its own kubelet at the host kubelet's path, with a kubelet's flags, in a pod using the cgroupfs driver.
		"a copy at the kubelet's path": func(h *fakeHost) fakeProcess {
			p := h.impostor(4242)
			h.file("containers/4242/usr/bin/kubelet", 0o755)
			p.argv, p.exe = []string{"/usr/bin/kubelet", "--lock-file=/l", "--exit-on-lock-contention"}, "/usr/bin/kubelet"
			p.cgroup = "4:memory:/kubepods/besteffort/pod1a2b/abc\n"
			return p
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost(t)
			h.start(impostor(h))
			h.start(kubelet(812, "--lock-file=/var/run/kubelet.lock", "--exit-on-lock-contention"))
			var lines []string
			k, ok, err := h.finder(&lines).Find(context.Background())
			if err != nil || !ok || k.PID != 812 {
				t.Fatalf("Find = %+v, %v, %v; want the kubelet, pid 812", k, ok, err)
			}
			if !slices.ContainsFunc(lines, func(l string) bool {
				return strings.Contains(l, "Rejected a process named kubelet") && strings.Contains(l, `"pid"=4242`)
			}) {
				t.Errorf("no log line names the rejected pid 4242: %q", lines)
			}
		})
	}
}

func TestFindRefusesTwoKubelets(t *testing.T) {
	h := newFakeHost(t)
	h.start(kubelet(812))
	h.start(kubelet(813))
	var lines []string
	_, ok, err := h.finder(&lines).Find(context.Background())
	if err == nil || ok || !strings.Contains(err.Error(), "812") || !strings.Contains(err.Error(), "813") {
		t.Errorf("Find: ok %v, err %v; want an error naming pids 812 and 813", ok, err)
	}
}

func TestFindRejectsAnExecutableOthersCanReplace(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(h *fakeHost)
		want   string
	}{
		"world-writable directory": {func(h *fakeHost) { h.chmod("host/usr/bin", 0o777) }, "/usr/bin is writable by group or others"},
		"group-writable file":      {func(h *fakeHost) { h.chmod("host/usr/bin/kubelet", 0o775) }, "/usr/bin/kubelet is writable by group or others"},
		"writable root":            {func(h *fakeHost) { h.chmod("host", 0o757) }, "/ is writable by group or others"},
		"another owner": {func(h *fakeHost) {
			if os.Geteuid() != 0 {
				h.t.Skip("chown needs root")
			}
			if err := os.Chown(filepath.Join(h.root, "usr/bin/kubelet"), 1000, 1000); err != nil {
				h.t.Fatal(err)
			}
		}, "/usr/bin/kubelet is not owned by uid 0"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost(t)
			h.start(kubelet(812))
			tc.change(h)
			var lines []string
			_, ok, err := h.finder(&lines).Find(context.Background())
			if err == nil || ok || !strings.Contains(err.Error(), "pid 812: executable check: "+tc.want) {
				t.Errorf("Find: ok %v, err %v; want pid 812 rejected: %s", ok, err, tc.want)
			}
		})
	}
}

func TestFindRejectsAReplacedExecutable(t *testing.T) {
	h := newFakeHost(t)
	p := kubelet(812)
	p.exe = "/usr/bin/kubelet (deleted)" // upgraded while it runs: the host's /usr/bin/kubelet is another file
	h.start(p)
	var lines []string
	if _, _, err := h.finder(&lines).Find(context.Background()); err == nil || !strings.Contains(err.Error(), "removed since it started") {
		t.Errorf("err = %v; want the removed executable named", err)
	}
}

func TestPodsCgroupTree(t *testing.T) {
	for p, inPods := range map[string]bool{
		"/system.slice/kubelet.service": false,
		"/":                             false,
		"/user.slice/kubepodsx":         false,
		"/kubepods/burstable/pod1/c":    true,
		"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-c.scope": true,
		"/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod1.slice":                               true, // kind: cgroupRoot /kubelet
		"/custom/kubepods/pod1":  true,
		"/../../system.slice/x":  true, // outside this process's cgroup namespace: cannot be placed
		"/process_api/abc/def.1": false,
	} {
		if err := podsCgroupTree(p); (err != nil) != inPods {
			t.Errorf("podsCgroupTree(%q) = %v; want rejected %v", p, err, inPods)
		}
	}
}

func TestFindTheHostsMountNamespace(t *testing.T) {
	// A process with everything of the kubelet's but its mount namespace: only root can make one.
	otherNS := func(h *fakeHost) {
		p := kubelet(812)
		p.mntNS = "mnt:[4026532999]"
		h.start(p)
	}
	for name, tc := range map[string]struct {
		noPID1, inHost, found bool
	}{
		"PID 1's":                        {found: false},
		"this process's, in the host's":  {noPID1: true, inHost: true, found: false},
		"unknown: root directories only": {noPID1: true, found: true},
	} {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost(t)
			otherNS(h)
			if tc.noPID1 {
				if err := os.RemoveAll(filepath.Join(h.proc, "1")); err != nil {
					t.Fatal(err)
				}
			}
			var lines []string
			f := h.finder(&lines)
			f.InHost = tc.inHost
			_, ok, err := f.Find(context.Background())
			if ok != tc.found || (!tc.found && (err == nil || !strings.Contains(err.Error(), "mount namespace check"))) {
				t.Errorf("Find: ok %v, err %v; want found %v", ok, err, tc.found)
			}
		})
	}
}

// fakeSystemd answers MainPID.
type fakeSystemd struct {
	pid    int
	loaded bool
	err    error
}

func (s fakeSystemd) MainPID(context.Context, string) (int, bool, error) {
	return s.pid, s.loaded, s.err
}

func TestFindAsksSystemd(t *testing.T) {
	for name, tc := range map[string]struct {
		systemd UnitMainPID
		wantErr string
		wantLog string
	}{
		"its main PID":         {systemd: fakeSystemd{pid: 812, loaded: true}},
		"another main PID":     {systemd: fakeSystemd{pid: 4242, loaded: true}, wantErr: "pid 812"},
		"no kubelet unit":      {systemd: fakeSystemd{}, wantLog: "Systemd has no kubelet unit"},
		"no systemd":           {systemd: fakeSystemd{err: ErrNoSystemd}, wantLog: "Systemd does not run"},
		"systemd not answered": {systemd: fakeSystemd{err: errors.New("connection refused")}, wantErr: "connection refused"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost(t)
			h.start(kubelet(812))
			var lines []string
			f := h.finder(&lines)
			f.Systemd = tc.systemd
			_, ok, err := f.Find(context.Background())
			if tc.wantErr != "" {
				if err == nil || ok || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "systemd") {
					t.Errorf("Find: ok %v, err %v; want an error naming %q", ok, err, tc.wantErr)
				}
				return
			}
			if err != nil || !ok {
				t.Fatalf("Find: ok %v, err %v; want the kubelet", ok, err)
			}
			if tc.wantLog != "" && !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, tc.wantLog) }) {
				t.Errorf("log %q lacks %q", lines, tc.wantLog)
			}
		})
	}
}

func TestSystemdUnitsWithoutSystemd(t *testing.T) {
	_, _, err := SystemdUnits{Root: t.TempDir()}.MainPID(context.Background(), KubeletUnit)
	if !errors.Is(err, ErrNoSystemd) {
		t.Errorf("err = %v; want ErrNoSystemd", err)
	}
}
