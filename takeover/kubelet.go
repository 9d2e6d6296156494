package takeover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Kubeadm's files, read when no kubelet runs.
const (
	KubeadmFlagsFile       = "/var/lib/kubelet/kubeadm-flags.env"
	KubeadmConfigFile      = "/var/lib/kubelet/config.yaml"
	KubeadmKubeconfig      = "/etc/kubernetes/kubelet.conf"
	KubeadmBootstrapFile   = "/etc/kubernetes/bootstrap-kubelet.conf"
	kubeletExtraArgsDebian = "/etc/default/kubelet"
	kubeletExtraArgsRHEL   = "/etc/sysconfig/kubelet"
)

// KubeadmArgs are the flags kubeadm's systemd drop-in gives the kubelet, read from its files under root
// ("/"): the kubeconfig, bootstrap kubeconfig and config file, then KUBELET_KUBEADM_ARGS from
// kubeadm-flags.env and KUBELET_EXTRA_ARGS from /etc/default/kubelet (or /etc/sysconfig/kubelet).
func KubeadmArgs(root string) ([]string, error) {
	flags, err := os.ReadFile(filepath.Join(root, KubeadmFlagsFile))
	if err != nil {
		return nil, fmt.Errorf("no kubelet runs and kubeadm's flags cannot be read: %w", err)
	}
	args := []string{"--bootstrap-kubeconfig=" + KubeadmBootstrapFile, "--kubeconfig=" + KubeadmKubeconfig,
		"--config=" + KubeadmConfigFile}
	kubeadm, err := envArgs(flags, "KUBELET_KUBEADM_ARGS")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KubeadmFlagsFile, err)
	}
	args = append(args, kubeadm...)
	for _, f := range []string{kubeletExtraArgsDebian, kubeletExtraArgsRHEL} {
		data, err := os.ReadFile(filepath.Join(root, f))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		extra, err := envArgs(data, "KUBELET_EXTRA_ARGS")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		args = append(args, extra...)
		break
	}
	return args, nil
}

// envArgs reads KEY=value (the value quoted or not) from an environment file as systemd does, and splits
// the value into arguments at white space, as systemd expands $KEY in ExecStart.
func envArgs(data []byte, key string) ([]string, error) {
	for _, line := range bytes.Split(data, []byte("\n")) {
		l := strings.TrimSpace(string(line))
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || strings.TrimSpace(k) != key {
			continue
		}
		words, err := splitArgs(strings.TrimSpace(v))
		if err != nil {
			return nil, err
		}
		// The unit passes $KEY unbraced: systemd splits the value at white space, quotes already gone.
		var args []string
		for _, w := range words {
			args = append(args, strings.Fields(w)...)
		}
		return args, nil
	}
	return nil, nil
}

// splitArgs splits a command line at unquoted white space; single and double quotes group, a backslash
// escapes the next character outside single quotes.
func splitArgs(s string) ([]string, error) {
	var sp argSplitter
	for _, r := range s {
		sp.next(r)
	}
	if sp.quote != 0 || sp.escaped {
		return nil, fmt.Errorf("unterminated quote or escape in %q", s)
	}
	sp.endArg()
	return sp.args, nil
}

// argSplitter is splitArgs' state.
type argSplitter struct {
	args    []string
	cur     strings.Builder
	inArg   bool
	quote   rune
	escaped bool
}

func (sp *argSplitter) next(r rune) {
	switch {
	case sp.escaped:
		sp.cur.WriteRune(r)
		sp.escaped = false
	case r == '\\' && sp.quote != '\'':
		sp.escaped, sp.inArg = true, true
	case sp.quote != 0 && r == sp.quote:
		sp.quote = 0
	case sp.quote != 0:
		sp.cur.WriteRune(r)
	case r == '"' || r == '\'':
		sp.quote, sp.inArg = r, true
	case r == ' ' || r == '\t':
		sp.endArg()
	default:
		sp.cur.WriteRune(r)
		sp.inArg = true
	}
}

func (sp *argSplitter) endArg() {
	if sp.inArg {
		sp.args = append(sp.args, sp.cur.String())
		sp.cur.Reset()
		sp.inArg = false
	}
}

// LockFlags returns the kubelet's --lock-file and whether it exits on lock contention. Without both, the
// kubelet cannot hand the node over: it would keep running next to nodelet.
func LockFlags(args []string) (lockFile string, exitOnContention bool) {
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") {
			continue
		}
		switch name {
		case "lock-file":
			if !hasValue && i+1 < len(args) {
				i++
				value = args[i]
			}
			lockFile = value
		case "exit-on-lock-contention":
			exitOnContention = !hasValue || value == "true"
		}
	}
	return lockFile, exitOnContention
}

// KubeletArgs returns the flags nodelet runs the node with, from inside the host's mount namespace: the
// command line of the running kubelet that f finds, else kubeadm's files under f's root. from says which.
// A running kubelet without --lock-file and --exit-on-lock-contention is an error: it would not hand the
// node over.
func KubeletArgs(ctx context.Context, f Finder) (args []string, from string, err error) {
	k, running, err := f.Find(ctx)
	if err != nil {
		return nil, "", err
	}
	if !running {
		args, err := KubeadmArgs(f.root())
		return args, "kubeadm's files", err
	}
	if lock, exit := LockFlags(k.Args); lock == "" || !exit {
		return nil, "", fmt.Errorf("the kubelet (pid %d) runs without --lock-file and --exit-on-lock-contention, so it "+
			"cannot hand the node over: add both to its flags (e.g. --lock-file=/var/run/kubelet.lock "+
			"--exit-on-lock-contention in KUBELET_EXTRA_ARGS) and restart it", k.PID)
	}
	return k.Args, fmt.Sprintf("the running kubelet (pid %d)", k.PID), nil
}
