package takeover

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
)

// ErrUsage marks an error in the command line of `nodelet takeover` (exit status 2, as a flag error).
var ErrUsage = errors.New("usage")

// LockContentionIgnoresKubelet is the agent flag the takeover adds to the kubelet's: the agent asks for
// the kubelet's lock file and does not exit when the kubelet it takes over from holds it.
const LockContentionIgnoresKubelet = "--lock-contention-ignores-kubelet"

// Command is `nodelet takeover`, the command of the DaemonSet pod (deploy/), in two stages. In the pod
// (the first stage) it enters the host's mount namespace by executing itself there with "--in-host"
// (Enter, which returns only on failure); there (the second stage) it returns the flags the agent runs
// the node with: the kubelet's (KubeletArgs), LockContentionIgnoresKubelet, then the flags args gives
// after "--". A flag error wraps ErrUsage; pflag.ErrHelp is returned as it is.
func Command(ctx context.Context, args []string, log logr.Logger) ([]string, error) {
	fs := pflag.NewFlagSet("takeover", pflag.ContinueOnError)
	hostRoot := fs.String("host-root", "/host", "where the pod mounts the host's /")
	binDir := fs.String("bin-dir", "/var/lib/nodelet/bin", "host directory the nodelet binary is copied to")
	nsenter := fs.String("nsenter", "/usr/bin/nsenter", "the host's nsenter")
	inHost := fs.Bool("in-host", false, "already in the host's mount namespace (set by the first stage)")
	_ = fs.MarkHidden("in-host")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	extra := fs.Args()
	// The host's /proc and / once changed root to the host's (first stage) or in its mount namespace.
	finder := Finder{InHost: *inHost, Systemd: SystemdUnits{}, Log: log}
	if !*inHost {
		next := append([]string{"takeover", "--in-host", "--"}, extra...)
		err := Enter(ctx, EnterOptions{HostRoot: *hostRoot, BinDir: *binDir, Nsenter: *nsenter, Args: next, Finder: finder})
		return nil, fmt.Errorf("cannot enter the host: %w", err)
	}
	kubeletArgs, from, err := KubeletArgs(ctx, finder)
	if err != nil {
		return nil, err
	}
	log.Info("Running with the kubelet's flags", "from", from, "flags", kubeletArgs, "extra", extra)
	return append(append(kubeletArgs, LockContentionIgnoresKubelet), extra...), nil
}
