package podconfig

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
)

// The kubelet's limits on termination messages (pkg/kubelet/container/runtime.go).
const (
	// MaxTerminationMessageLength is the most read from a container's termination message file.
	MaxTerminationMessageLength = 4 * 1024
	// MaxPodTerminationMessageLength caps the termination messages of all a pod's containers together;
	// applying it is up to whoever builds the pod status.
	MaxPodTerminationMessageLength = 12 * 1024
	maxTerminationLogBytes         = 2 * 1024 // of the log tail with FallbackToLogsOnError
	maxTerminationLogLines         = 80
)

const (
	managedHostsHeader                = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderWithHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
	etcHostsFileName                  = "etc-hosts"
	podContainersDirName              = "containers"
	podsDirName                       = "pods"
)

// hostEtcHosts is the node's hosts file, copied for host-network pods (a variable for tests).
var hostEtcHosts = etcHostsPath

// ContainerFiles are the pod files the kubelet prepares on the host for one container attempt.
type ContainerFiles struct {
	EtcHosts       string // host path of the pod's hosts file ("" = don't mount)
	TerminationLog string // host path of this container attempt's termination message file
}

// PodDir is the pod's directory under the agent's root dir: <root>/pods/<uid>, holding etc-hosts,
// containers/<name>/<random id> (termination messages) and volumes/. A UID that is not a single path
// segment (podrules.PathSegment) is an error.
func PodDir(rootDir string, uid types.UID) (string, error) {
	if err := podrules.PathSegment("pod UID", string(uid)); err != nil {
		return "", err
	}
	return filepath.Join(rootDir, podsDirName, string(uid)), nil
}

// EnsureEtcHosts writes <podDir>/etc-hosts like the kubelet and returns its path. A pod on the pod
// network gets the managed file: header, localhost and IPv6 entries, each pod IP with the hostname (and
// its FQDN with a subdomain), then spec.hostAliases; "" while it has no IP yet (nothing to mount). A
// host-network pod gets the node's /etc/hosts behind a header, then its host aliases.
func EnsureEtcHosts(podDir string, pod *corev1.Pod, podIPs []string, clusterDomain string) (string, error) {
	var content []byte
	switch {
	case pod.Spec.HostNetwork:
		node, err := os.ReadFile(hostEtcHosts)
		if err != nil {
			return "", fmt.Errorf("read node hosts file: %w", err)
		}
		content = append([]byte(managedHostsHeaderWithHostNetwork), node...)
		content = append(content, hostAliasEntries(pod.Spec.HostAliases)...)
	case len(podIPs) == 0:
		return "", nil
	default:
		hostname, domain, err := PodHostnameAndDomain(pod, clusterDomain)
		if err != nil {
			return "", err
		}
		content = managedHostsContent(podIPs, hostname, domain, pod.Spec.HostAliases)
	}
	if err := os.MkdirAll(podDir, 0o750); err != nil {
		return "", fmt.Errorf("create pod dir: %w", err)
	}
	p := filepath.Join(podDir, etcHostsFileName)
	// Written in place (not renamed over): running containers bind-mount this very file.
	if err := os.WriteFile(p, content, 0o644); err != nil {
		return "", fmt.Errorf("write hosts file: %w", err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		return "", fmt.Errorf("chmod hosts file: %w", err)
	}
	return p, nil
}

func managedHostsContent(podIPs []string, hostname, domain string, aliases []corev1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
			continue
		}
		fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
	}
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

func hostAliasEntries(aliases []corev1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}

// NewTerminationLog creates an empty, world-writable file for one container attempt's termination
// message under <podDir>/containers/<name>/ and returns its path. A container name that is not a single
// path segment is an error.
func NewTerminationLog(podDir, containerName string) (string, error) {
	if err := podrules.PathSegment("container name", containerName); err != nil {
		return "", err
	}
	dir := filepath.Join(podDir, podContainersDirName, containerName)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("create container dir: %w", err)
	}
	for range 10 {
		p := filepath.Join(dir, fmt.Sprintf("%08x", rand.Uint32()))
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("create termination log: %w", err)
		}
		if err := f.Close(); err != nil {
			return "", fmt.Errorf("create termination log: %w", err)
		}
		// The umask applied at creation; the container's user, whoever it is, must be able to write.
		if err := os.Chmod(p, 0o666); err != nil {
			return "", fmt.Errorf("chmod termination log: %w", err)
		}
		return p, nil
	}
	return "", fmt.Errorf("create termination log in %s: no free name", dir)
}

// ReadTerminationMessage returns an exited attempt's termination message like the kubelet: the last 4096
// bytes of the termination message file; or, with FallbackToLogsOnError, a non-zero exit and an empty or
// missing file, the last 80 lines (at most 2048 bytes) of the container's CRI log.
func ReadTerminationMessage(path string, policy corev1.TerminationMessagePolicy, exitCode int32, logPath string) string {
	fallback := policy == corev1.TerminationMessageFallbackToLogsOnError && exitCode != 0
	msg, checkLogs := readTerminationFile(path, fallback)
	if checkLogs {
		return tailCRILog(logPath, maxTerminationLogLines, maxTerminationLogBytes)
	}
	return msg
}

// readTerminationFile reads the message file; checkLogs tells whether to fall back to the log.
func readTerminationFile(path string, fallback bool) (msg string, checkLogs bool) {
	if path == "" {
		return "", fallback
	}
	data, err := readTail(path, MaxTerminationMessageLength)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fallback
	}
	if err != nil {
		return fmt.Sprintf("Error on reading termination log %s: %v", path, err), false
	}
	return string(data), fallback && len(data) == 0
}

// readTail returns the last max bytes of a file.
func readTail(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if off := st.Size() - max; off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// tailCRILog returns the content of the last lines of a CRI log file (partial lines joined, full lines
// ending in a newline), keeping at most maxBytes from the end.
func tailCRILog(path string, lines int, maxBytes int) string {
	data, err := readTailLines(path, lines)
	if err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	var out []byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), len(data)+1)
	for sc.Scan() {
		if content, ok := parseCRILogLine(sc.Text()); ok {
			out = append(out, content...)
		}
	}
	if len(out) > maxBytes {
		out = out[len(out)-maxBytes:]
	}
	return string(out)
}

// parseCRILogLine parses "<RFC3339Nano> <stream> <P|F>[:tags] <content>": full lines get their newline.
func parseCRILogLine(line string) (string, bool) {
	parts := strings.SplitN(line, " ", 4)
	if len(parts) < 3 {
		return "", false
	}
	if parts[1] != string(runtimeapi.Stdout) && parts[1] != string(runtimeapi.Stderr) {
		return "", false
	}
	content := ""
	if len(parts) == 4 {
		content = parts[3]
	}
	tag, _, _ := strings.Cut(parts[2], ":")
	if runtimeapi.LogTag(tag) == runtimeapi.LogTagPartial {
		return content, true
	}
	return content + "\n", true
}

// readTailLines returns the last n lines of a file, reading backwards in blocks.
func readTailLines(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("failed to open log file %q: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	const block = 32 * 1024
	var buf []byte
	for off := st.Size(); off > 0; {
		size := min(int64(block), off)
		off -= size
		chunk := make([]byte, size)
		if _, err := f.ReadAt(chunk, off); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		buf = append(chunk, buf...)
		if start, ok := tailStart(buf, n); ok {
			return buf[start:], nil
		}
	}
	return buf, nil
}

// tailStart finds where the last n lines of buf begin (a final newline ends the last line, it does
// not start another); ok is false when buf holds fewer than n complete lines plus the line before.
func tailStart(buf []byte, n int) (int, bool) {
	end := len(buf)
	if end > 0 && buf[end-1] == '\n' {
		end--
	}
	for i := 0; i < n; i++ {
		j := bytes.LastIndexByte(buf[:end], '\n')
		if j < 0 {
			return 0, false
		}
		end = j
	}
	return end + 1, true
}
