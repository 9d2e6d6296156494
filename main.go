// Command nodelet is a Kubernetes node agent: it does the kubelet's job as a controller-runtime operator
// that runs once per node. main only wires: flags and configuration, logging, then the agent.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	"k8s.io/klog/v2"
	_ "k8s.io/kubernetes/pkg/features" // Kubernetes' feature gates in the default gate, as in the kubelet (kubernetes_feature_enabled)
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/agent"
	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/hollow"
	"github.com/nodelet/nodelet/internal/exepages"
	"github.com/nodelet/nodelet/nodecreds"
	"github.com/nodelet/nodelet/staticpods/kubeletuid"
	"github.com/nodelet/nodelet/takeover"
)

// Set at build time (-ldflags -X main.version=...).
var (
	version     = "dev"
	kubeVersion = "v1.37.1"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "hollow" {
		hollowMain(os.Args[2:])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "takeover" {
		takeoverMain(os.Args[2:])
		return
	}
	agentMain(os.Args[1:])
}

// defaultGCPercent is the Go garbage collector's target for the agent when GOGC is not set. The agent's
// live heap is small and steady (about 10 MB at 100 pods) while its relists and stats make short-lived
// garbage all the time: collecting at +50% rather than Go's +100% keeps about 7 MiB less resident at 100
// pods for a few hundredths of a CPU second a minute (README, "Benchmarks").
const defaultGCPercent = 50

// startupPagesReleaseDelay is how long after its start the agent gives back the pages of its binary that
// start-up read (exepages): by then the first list of the node's pods and their first syncs are done, and
// the read-only data the agent reads again comes back a page at a time. At 100 idle pods this takes its resident memory
// from about 60 MiB to about 37 (README, "Benchmarks").
const startupPagesReleaseDelay = time.Minute

// grpcBufferTiers are the sizes (powers of two) of the pooled buffers gRPC receives messages into. Its
// default pool has no size between 32 KiB and 1 MiB, so each relist's or stats call's answer at 100 pods
// (about 100 KiB) takes, and leaves pooled, a 1 MiB buffer; a tier per power of two keeps what stays
// pooled near what was received.
var grpcBufferTiers = []uint8{8, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24}

// agentMain runs the node agent with the kubelet's flags.
func agentMain(args []string) {
	cfg, err := config.Load(args)
	if errors.Is(err, pflag.ErrHelp) {
		os.Exit(0)
	}
	if errors.Is(err, config.ErrVersion) {
		fmt.Println("Kubernetes", kubeVersion+"+nodelet")
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodelet: invalid configuration:", err)
		os.Exit(1)
	}
	log := newLogger(cfg.Verbosity)
	cfg.LogNotices(log)
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	pool, err := mem.NewBinaryTieredBufferPool(grpcBufferTiers...)
	if err != nil {
		log.Error(err, "gRPC buffer pool")
		os.Exit(1)
	}
	experimental.SetDefaultBufferPool(pool)
	if err := run(ctrl.SetupSignalHandler(), cfg, log); err != nil {
		log.Error(err, "nodelet failed")
		os.Exit(1)
	}
}

// run holds the node's lock file (if any) while the agent runs; another agent asking for the lock ends
// the run cleanly, as the kubelet exits on lock contention.
func run(ctx context.Context, cfg *config.Config, log logr.Logger) error {
	lock, err := agent.Lock(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer lock.Release()
	ctx, contended := lock.Context(ctx)
	// TLS bootstrap and client certificate rotation, as the kubelet's flags ask (nil: a plain kubeconfig).
	restCfg, err := nodecreds.ClientConfig(ctx, cfg, log)
	if err != nil {
		return err
	}
	if restCfg != nil {
		agent.TuneRestConfig(restCfg, cfg, version)
	}
	a, err := agent.New(ctx, agent.Options{Config: cfg, Version: version, KubeletVersion: kubeVersion + "+nodelet", Logger: log,
		RestConfig: restCfg, StaticPodUIDs: kubeletuid.UIDs, ServingCertificates: nodecreds.ServingCertificates(cfg)})
	if err != nil {
		return err
	}
	go exepages.ReleaseAfter(ctx, clock.RealClock{}, startupPagesReleaseDelay, log)
	if err := a.Run(ctx); err != nil {
		return err
	}
	if contended() {
		log.Info("Lock file contention: another agent takes the node over, exiting", "path", cfg.LockFile)
	}
	return nil
}

// takeoverMain is `nodelet takeover`, the command of the DaemonSet pod (deploy/): the agent with the flags
// of the kubelet it takes the node over from, run in the host's mount namespace (takeover.Command).
func takeoverMain(args []string) {
	agentArgs, err := takeover.Command(context.Background(), args, newLogger(0).WithName("takeover"))
	switch {
	case errors.Is(err, pflag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, takeover.ErrUsage):
		fmt.Fprintln(os.Stderr, "nodelet takeover:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "nodelet takeover:", err)
		os.Exit(1)
	}
	agentMain(agentArgs)
}

// hollowMain is `nodelet hollow`: many simulated nodes in one process against a real cluster.
func hollowMain(args []string) {
	opts, err := hollow.ParseFlags(args)
	if errors.Is(err, pflag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodelet hollow:", err)
		os.Exit(1)
	}
	opts.Logger = newLogger(opts.Verbosity)
	ctx := ctrl.SetupSignalHandler()
	go exepages.ReleaseAfter(ctx, clock.RealClock{}, startupPagesReleaseDelay, opts.Logger)
	if err := hollow.Run(ctx, opts); err != nil {
		opts.Logger.Error(err, "nodelet hollow failed")
		os.Exit(1)
	}
}

// newLogger returns a JSON zap logger at the kubelet's -v level, and routes controller-runtime and
// client-go (klog) logs through it.
func newLogger(verbosity int) logr.Logger {
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(zapcore.Level(-verbosity))
	zc.Sampling = nil
	zc.EncoderConfig.TimeKey = "ts"
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	z, err := zc.Build()
	if err != nil {
		panic(err) // only on an invalid static configuration
	}
	log := zapr.NewLogger(z)
	ctrl.SetLogger(log)
	klog.SetLogger(log)
	return log
}
