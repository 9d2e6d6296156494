package takeover

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
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

func TestKubeletArgsFromTheRunningKubelet(t *testing.T) {
	h := newFakeHost(t)
	h.start(kubelet(812, "--config=/var/lib/kubelet/config.yaml", "--lock-file", "/var/run/kubelet.lock", "--exit-on-lock-contention"))
	var lines []string
	args, from, err := KubeletArgs(context.Background(), h.finder(&lines))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--config=/var/lib/kubelet/config.yaml", "--lock-file", "/var/run/kubelet.lock", "--exit-on-lock-contention"}
	if !slices.Equal(args, want) || !strings.Contains(from, "812") {
		t.Errorf("KubeletArgs = %q from %q; want %q from pid 812", args, from, want)
	}
}

func TestKubeletWithoutLockFlagsIsRefused(t *testing.T) {
	h := newFakeHost(t)
	h.start(kubelet(812, "--config=/c.yaml", "--lock-file=/l"))
	var lines []string
	_, _, err := KubeletArgs(context.Background(), h.finder(&lines))
	if err == nil || !strings.Contains(err.Error(), "--exit-on-lock-contention") {
		t.Errorf("err = %v; want a refusal naming the missing flags", err)
	}
}

// noKubelet finds in a /proc where no process is named kubelet, with the host's files under root.
func noKubelet(t *testing.T, root string) Finder {
	proc := t.TempDir()
	writeFile(t, filepath.Join(proc, "1", "cmdline"), "/sbin/init\x00")
	return Finder{Proc: proc, Root: root, Log: logr.Discard()}
}

func TestKubeadmArgsWhenNoKubeletRuns(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, KubeadmFlagsFile),
		`KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10"`+"\n")
	writeFile(t, filepath.Join(root, "etc/default/kubelet"), "# extra\nKUBELET_EXTRA_ARGS='--node-labels=a=b,c=d' --v=2\n")
	args, from, err := KubeletArgs(context.Background(), noKubelet(t, root))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
		"--config=/var/lib/kubelet/config.yaml", "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
		"--pod-infra-container-image=registry.k8s.io/pause:3.10", "--node-labels=a=b,c=d", "--v=2"}
	if !slices.Equal(args, want) || from != "kubeadm's files" {
		t.Errorf("args %q from %q\nwant %q", args, from, want)
	}
	if _, _, err := KubeletArgs(context.Background(), noKubelet(t, t.TempDir())); err == nil {
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
