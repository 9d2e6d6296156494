// Command bench measures pod start and stop latency on the test bed (hack/bed.sh): first the CRI floor
// (RunPodSandbox + CreateContainer + StartContainer straight to the bed's containerd, nodelet stopped), then
// nodelet (pod create → Running, delete → gone, seen through a watch), one pod at a time and in a burst. It
// prints the figures (BENCH lines and one BENCHJSON line) and never judges them: it exits 0 whatever the
// figures, non-zero only when a phase fails (a pod never running, an API or CRI error). Run it with
// hack/bench.sh (make bench), which brings up a bed of its own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const (
	defaultImage = "docker.io/library/busybox:latest"
	pauseImage   = "registry.k8s.io/pause:3.10"
	// runLimit bounds a pod's wait for Running, goneLimit its wait for deletion.
	runLimit  = 120 * time.Second
	goneLimit = 120 * time.Second
	// totalLimit bounds the whole program.
	totalLimit = 30 * time.Minute
)

// config holds the flags.
type config struct {
	kubeconfig  string
	criEndpoint string
	node        string
	bedScript   string
	bedDir      string
	single      int
	burst       int
	image       string
	idlePods    int
	resizes     int
	idleWindow  time.Duration
	kubelet     bool
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, totalLimit)
	defer cancel()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "bench: FAILED: %v\n", err)
		cancel()
		stop()
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "admin kubeconfig of the bed")
	fs.StringVar(&c.criEndpoint, "cri-endpoint", "", "CRI endpoint of the bed's containerd (unix:///path or /path)")
	fs.StringVar(&c.node, "node", "", "the node's name")
	fs.StringVar(&c.bedScript, "bed-script", "", "hack/bed.sh, to stop and start nodelet")
	fs.StringVar(&c.bedDir, "bed-dir", "", "the bed's BED_DIR")
	fs.IntVar(&c.single, "single", 10, "pods started one at a time")
	fs.IntVar(&c.burst, "burst", 30, "pods started at once")
	fs.IntVar(&c.resizes, "resizes", 10, "in-place resizes of one pod, back and forth (0 skips them)")
	fs.BoolVar(&c.kubelet, "kubelet", false, "also measure the kubelet (the bed's AGENT=kubelet) between the floor and nodelet")
	fs.IntVar(&c.idlePods, "idle-pods", 20, "running pods during the idle measurement (0 skips it)")
	fs.DurationVar(&c.idleWindow, "idle-window", time.Minute, "length of the idle measurement")
	fs.StringVar(&c.image, "image", defaultImage, "container image (present, or pullable from the bed's registry)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var missing []string
	for name, v := range map[string]string{"--kubeconfig": c.kubeconfig, "--cri-endpoint": c.criEndpoint,
		"--node": c.node, "--bed-script": c.bedScript, "--bed-dir": c.bedDir} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return c, fmt.Errorf("missing flags: %s", strings.Join(missing, " "))
	}
	if c.single < 1 || c.burst < 1 {
		return c, errors.New("--single and --burst must be at least 1")
	}
	return c, nil
}

// run runs both phases (a failed floor does not skip nodelet's), then prints whatever was measured.
func run(ctx context.Context, cfg config) error {
	r := newReport(cfg)
	floorErr := runFloor(ctx, cfg, r)
	if floorErr != nil {
		logf("floor phase failed: %v", floorErr)
	}
	var kubeletErr error
	if cfg.kubelet {
		if kubeletErr = runAgent(ctx, cfg, r, agentKubelet); kubeletErr != nil {
			logf("kubelet phase failed: %v", kubeletErr)
		}
	}
	nodeletErr := runAgent(ctx, cfg, r, agentNodelet)
	if nodeletErr != nil {
		logf("nodelet phase failed: %v", nodeletErr)
	}
	r.print(os.Stdout)
	var errs []error
	if floorErr != nil {
		errs = append(errs, fmt.Errorf("floor phase: %w", floorErr))
	}
	if kubeletErr != nil {
		errs = append(errs, fmt.Errorf("kubelet phase: %w", kubeletErr))
	}
	if nodeletErr != nil {
		errs = append(errs, fmt.Errorf("nodelet phase: %w", nodeletErr))
	}
	return errors.Join(errs...)
}

// bed runs `bash <bed-script> ARGS...` on the bed, its output going to stderr.
// bed runs bed.sh; agent, when set, is the node agent its "nodelet" component runs (AGENT).
func bed(ctx context.Context, cfg config, agent string, limit time.Duration, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{cfg.bedScript}, args...)...)
	cmd.Env = append(os.Environ(), "BED_DIR="+cfg.bedDir, "NODE_NAME="+cfg.node)
	if agent != "" {
		cmd.Env = append(cmd.Env, "AGENT="+agent)
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bed.sh %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// logf prints progress to stderr (the figures go to stdout).
func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[%s] bench: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
