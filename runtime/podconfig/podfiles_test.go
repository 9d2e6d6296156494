package podconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodDir(t *testing.T) {
	if got, err := PodDir("/var/lib/nodelet", "1234-abcd"); err != nil || got != "/var/lib/nodelet/pods/1234-abcd" {
		t.Errorf("PodDir = %q, %v", got, err)
	}
}

func TestEnsureEtcHosts(t *testing.T) {
	nodeHosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(nodeHosts, []byte("127.0.0.1 localhost\n192.168.0.10 node1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := hostEtcHosts
	hostEtcHosts = nodeHosts
	t.Cleanup(func() { hostEtcHosts = old })

	aliases := []corev1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"foo.remote", "bar.remote"}}}
	tests := []struct {
		name    string
		mutate  func(*corev1.Pod)
		podIPs  []string
		want    string // "" = no file
		wantErr bool
	}{
		{
			name:   "pod network",
			podIPs: []string{"10.244.0.5"},
			want: "# Kubernetes-managed hosts file.\n" +
				"127.0.0.1\tlocalhost\n" +
				"::1\tlocalhost ip6-localhost ip6-loopback\n" +
				"fe00::0\tip6-localnet\n" +
				"fe00::0\tip6-mcastprefix\n" +
				"fe00::1\tip6-allnodes\n" +
				"fe00::2\tip6-allrouters\n" +
				"10.244.0.5\tweb\n",
		},
		{
			name:   "dual stack, hostname and subdomain, host aliases",
			mutate: func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain, p.Spec.HostAliases = "front", "sub", aliases },
			podIPs: []string{"10.244.0.5", "fd00::5"},
			want: "# Kubernetes-managed hosts file.\n" +
				"127.0.0.1\tlocalhost\n" +
				"::1\tlocalhost ip6-localhost ip6-loopback\n" +
				"fe00::0\tip6-localnet\n" +
				"fe00::0\tip6-mcastprefix\n" +
				"fe00::1\tip6-allnodes\n" +
				"fe00::2\tip6-allrouters\n" +
				"10.244.0.5\tfront.sub.default.svc.cluster.local\tfront\n" +
				"fd00::5\tfront.sub.default.svc.cluster.local\tfront\n" +
				"\n# Entries added by HostAliases.\n" +
				"10.1.2.3\tfoo.remote\tbar.remote\n",
		},
		{name: "no pod IP yet: nothing to mount"},
		{
			name:   "host network: the node's hosts file",
			mutate: func(p *corev1.Pod) { p.Spec.HostNetwork, p.Spec.HostAliases = true, aliases },
			want: "# Kubernetes-managed hosts file (host network).\n" +
				"127.0.0.1 localhost\n192.168.0.10 node1\n" +
				"\n# Entries added by HostAliases.\n" +
				"10.1.2.3\tfoo.remote\tbar.remote\n",
		},
		{name: "invalid hostname", mutate: func(p *corev1.Pod) { p.Spec.Hostname = "-bad-" }, podIPs: []string{"10.244.0.5"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			if tt.mutate != nil {
				tt.mutate(pod)
			}
			podDir := filepath.Join(t.TempDir(), "pods", string(pod.UID))
			p, err := EnsureEtcHosts(podDir, pod, tt.podIPs, "cluster.local")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if tt.want == "" {
				if p != "" {
					t.Errorf("path %q, want none", p)
				}
				return
			}
			if p != filepath.Join(podDir, "etc-hosts") {
				t.Errorf("path %q", p)
			}
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
			if st, _ := os.Stat(p); st.Mode().Perm() != 0o644 {
				t.Errorf("mode %v", st.Mode())
			}
		})
	}
}

func TestEnsureEtcHostsRewritesInPlace(t *testing.T) {
	podDir := t.TempDir()
	pod := testPod()
	p, err := EnsureEtcHosts(podDir, pod, []string{"10.0.0.1"}, "cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(p)
	if _, err := EnsureEtcHosts(podDir, pod, []string{"10.0.0.2"}, "cluster.local"); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(p)
	if !os.SameFile(before, after) {
		t.Error("hosts file replaced: a container's bind mount would keep the old one")
	}
	if got, _ := os.ReadFile(p); !strings.Contains(string(got), "10.0.0.2\tweb\n") {
		t.Errorf("not updated:\n%s", got)
	}
}

func TestNewTerminationLog(t *testing.T) {
	podDir := t.TempDir()
	a, err := NewTerminationLog(podDir, "app")
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewTerminationLog(podDir, "app")
	if err != nil {
		t.Fatal(err)
	}
	if a == b || filepath.Dir(a) != filepath.Join(podDir, "containers", "app") {
		t.Errorf("paths %q and %q", a, b)
	}
	st, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 0 || st.Mode().Perm() != 0o666 {
		t.Errorf("size %d mode %v, want an empty 0666 file", st.Size(), st.Mode())
	}
}

// criLog renders CRI log lines: each entry is "<stream> <tag> <content>".
func criLog(entries ...string) string {
	var b strings.Builder
	for i, e := range entries {
		fmt.Fprintf(&b, "2026-01-02T03:04:%02d.123456789Z %s\n", i%60, e)
	}
	return b.String()
}

func TestReadTerminationMessage(t *testing.T) {
	manyLines := make([]string, 100)
	for i := range manyLines {
		manyLines[i] = fmt.Sprintf("stdout F line %d", i)
	}
	var wantTail strings.Builder
	for i := 20; i < 100; i++ {
		fmt.Fprintf(&wantTail, "line %d\n", i)
	}
	longLines := make([]string, 50)
	for i := range longLines {
		longLines[i] = "stderr F " + strings.Repeat(string(rune('a'+i%26)), 99)
	}
	tests := []struct {
		name     string
		file     *string // nil = no file
		policy   corev1.TerminationMessagePolicy
		exitCode int32
		log      string
		want     string
	}{
		{name: "file contents", file: ptrS("bye\n"), policy: corev1.TerminationMessageReadFile, exitCode: 1, log: criLog("stdout F x"), want: "bye\n"},
		{name: "empty file, ReadFile", file: ptrS(""), policy: corev1.TerminationMessageReadFile, exitCode: 1, log: criLog("stdout F x"), want: ""},
		{name: "file wins over logs", file: ptrS("msg"), policy: corev1.TerminationMessageFallbackToLogsOnError, exitCode: 2, log: criLog("stdout F x"), want: "msg"},
		{name: "last 4096 bytes of the file", file: ptrS(strings.Repeat("a", 100) + strings.Repeat("b", 4096)), policy: corev1.TerminationMessageReadFile,
			want: strings.Repeat("b", 4096)},
		{name: "fallback: empty file, non-zero exit", file: ptrS(""), policy: corev1.TerminationMessageFallbackToLogsOnError, exitCode: 1,
			log: criLog("stdout F hello", "stderr P part one, ", "stderr F part two", "stdout F "), want: "hello\npart one, part two\n\n"},
		{name: "fallback: missing file", policy: corev1.TerminationMessageFallbackToLogsOnError, exitCode: 137,
			log: criLog("stdout F killed"), want: "killed\n"},
		{name: "no fallback on success", file: ptrS(""), policy: corev1.TerminationMessageFallbackToLogsOnError, exitCode: 0,
			log: criLog("stdout F hello"), want: ""},
		{name: "fallback: last 80 lines", file: ptrS(""), policy: corev1.TerminationMessageFallbackToLogsOnError, exitCode: 1,
			log: criLog(manyLines...), want: wantTail.String()},
		{name: "fallback: last 2048 bytes", file: ptrS(""), policy: corev1.TerminationMessageFallbackToLogsOnError, exitCode: 1,
			log: criLog(longLines...), want: strings.Join(lastLines(longLines, 2048), "")},
		{name: "fallback: malformed lines skipped", file: ptrS(""), policy: corev1.TerminationMessageFallbackToLogsOnError, exitCode: 1,
			log: "garbage\n" + criLog("stdout F ok") + "2026-01-02T03:04:05Z stdin F no\n", want: "ok\n"},
		{name: "fallback: no log file", file: ptrS(""), policy: corev1.TerminationMessageFallbackToLogsOnError, exitCode: 1,
			want: "Error on reading termination message from logs: failed to open log file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			msgPath := filepath.Join(dir, "termination-log")
			if tt.file != nil {
				if err := os.WriteFile(msgPath, []byte(*tt.file), 0o666); err != nil {
					t.Fatal(err)
				}
			}
			logPath := filepath.Join(dir, "0.log")
			if tt.log != "" {
				if err := os.WriteFile(logPath, []byte(tt.log), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			got := ReadTerminationMessage(msgPath, tt.policy, tt.exitCode, logPath)
			if strings.HasPrefix(tt.want, "Error on") {
				if !strings.HasPrefix(got, tt.want) {
					t.Errorf("got %q, want a message starting with %q", got, tt.want)
				}
				return
			}
			if got != tt.want {
				t.Errorf("got %q (%d bytes), want %q (%d bytes)", got, len(got), tt.want, len(tt.want))
			}
		})
	}
}

func TestReadTerminationMessageNoPath(t *testing.T) {
	if got := ReadTerminationMessage("", corev1.TerminationMessageReadFile, 1, ""); got != "" {
		t.Errorf("got %q", got)
	}
}

// lastLines is the last max bytes of the CRI log lines' contents, as the kubelet keeps them.
func lastLines(lines []string, max int) []string {
	var all string
	for _, l := range lines {
		all += strings.SplitN(l, " ", 3)[2] + "\n"
	}
	return []string{all[len(all)-max:]}
}

func ptrS(s string) *string { return &s }

func TestTailStart(t *testing.T) {
	tests := []struct {
		buf    string
		n      int
		want   string
		wantOK bool
	}{
		{"a\nb\nc\n", 2, "b\nc\n", true},
		{"a\nb\nc", 2, "b\nc", true},
		{"b\nc\n", 2, "", false}, // the line before is not known yet
		{"x\nb\nc\n", 3, "", false},
	}
	for _, tt := range tests {
		start, ok := tailStart([]byte(tt.buf), tt.n)
		if ok != tt.wantOK || (ok && tt.buf[start:] != tt.want) {
			t.Errorf("tailStart(%q, %d) = %d, %v", tt.buf, tt.n, start, ok)
		}
	}
}
