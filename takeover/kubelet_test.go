package takeover

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fakeProc(t *testing.T, cmdlines map[string][]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, argv := range cmdlines {
		writeFile(t, filepath.Join(root, pid, "cmdline"), strings.Join(argv, "\x00")+"\x00")
	}
	writeFile(t, filepath.Join(root, "self", "cmdline"), "x\x00")
	writeFile(t, filepath.Join(root, "2", "cmdline"), "") // a kernel thread
	return root
}

func TestKubeletArgsFromTheRunningKubelet(t *testing.T) {
	proc := fakeProc(t, map[string][]string{
		"1":   {"/sbin/init"},
		"812": {"/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml", "--lock-file", "/var/run/kubelet.lock", "--exit-on-lock-contention"},
		"900": {"/usr/bin/containerd"},
	})
	args, from, err := KubeletArgs(proc, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--config=/var/lib/kubelet/config.yaml", "--lock-file", "/var/run/kubelet.lock", "--exit-on-lock-contention"}
	if !slices.Equal(args, want) || !strings.Contains(from, "812") {
		t.Errorf("KubeletArgs = %q from %q; want %q from pid 812", args, from, want)
	}
}

func TestKubeletWithoutLockFlagsIsRefused(t *testing.T) {
	proc := fakeProc(t, map[string][]string{"812": {"kubelet", "--config=/c.yaml", "--lock-file=/l"}})
	_, _, err := KubeletArgs(proc, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "--exit-on-lock-contention") {
		t.Errorf("err = %v; want a refusal naming the missing flags", err)
	}
	proc = fakeProc(t, map[string][]string{"1": {"kubelet"}, "2": {"/opt/bin/kubelet"}})
	if _, _, err := KubeletArgs(proc, t.TempDir()); err == nil {
		t.Error("two kubelets: no error")
	}
}

func TestKubeadmArgsWhenNoKubeletRuns(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, KubeadmFlagsFile),
		`KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10"`+"\n")
	writeFile(t, filepath.Join(root, "etc/default/kubelet"), "# extra\nKUBELET_EXTRA_ARGS='--node-labels=a=b,c=d' --v=2\n")
	args, from, err := KubeletArgs(fakeProc(t, nil), root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
		"--config=/var/lib/kubelet/config.yaml", "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
		"--pod-infra-container-image=registry.k8s.io/pause:3.10", "--node-labels=a=b,c=d", "--v=2"}
	if !slices.Equal(args, want) || from != "kubeadm's files" {
		t.Errorf("args %q from %q\nwant %q", args, from, want)
	}
	if _, _, err := KubeletArgs(fakeProc(t, nil), t.TempDir()); err == nil {
		t.Error("no kubelet and no kubeadm files: no error")
	}
}

func TestSplitArgs(t *testing.T) {
	for in, want := range map[string][]string{
		`a b  c`:               {"a", "b", "c"},
		`"a b" 'c d' e\ f`:     {"a b", "c d", "e f"},
		`--x="1 2" --y=''`:     {"--x=1 2", "--y="},
		`'it''s' "say \"hi\""`: {"its", `say "hi"`},
	} {
		got, err := splitArgs(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("splitArgs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := splitArgs(`"open`); err == nil {
		t.Error("an unterminated quote: no error")
	}
}

func TestLockFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		lock string
		exit bool
	}{
		{[]string{"--lock-file=/a", "--exit-on-lock-contention"}, "/a", true},
		{[]string{"--lock-file", "/b", "--exit-on-lock-contention=true"}, "/b", true},
		{[]string{"-lock-file=/c", "--exit-on-lock-contention=false"}, "/c", false},
		{[]string{"--config=/x"}, "", false},
	} {
		lock, exit := LockFlags(tc.args)
		if lock != tc.lock || exit != tc.exit {
			t.Errorf("LockFlags(%q) = %q, %v; want %q, %v", tc.args, lock, exit, tc.lock, tc.exit)
		}
	}
}
