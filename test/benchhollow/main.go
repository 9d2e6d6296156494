// Command benchhollow measures hollow nodes (`nodelet hollow`) against a real control plane: etcd and
// kube-apiserver v1.37.1 (the bed's binaries, started through envtest, KUBEBUILDER_ASSETS). For each
// tier of N nodes it starts one `nodelet hollow` process, waits until all N Nodes are Ready, creates
// pods-per-node pods bound to each node and waits until all are Running (seen through a watch), then
// samples the process: RSS and CPU idle with the nodes only, and with the pods, over a window. It prints
// the figures (BENCH lines and a table) and never judges them; it fails only when a phase does not
// finish. Run it with `make bench-hollow`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

type config struct {
	nodelet     string
	tiers       []int
	podsPerNode int
	window      time.Duration
	limit       time.Duration
	profile     string
}

func parseFlags(args []string) (config, error) {
	var c config
	var tiers string
	fs := flag.NewFlagSet("benchhollow", flag.ContinueOnError)
	fs.StringVar(&c.nodelet, "nodelet", "bin/nodelet", "the nodelet binary")
	fs.StringVar(&tiers, "nodes", "100,500,1000", "node counts, one tier each")
	fs.IntVar(&c.podsPerNode, "pods-per-node", 10, "pods bound to each node")
	fs.DurationVar(&c.window, "window", 30*time.Second, "idle sampling window")
	fs.DurationVar(&c.limit, "tier-limit", 15*time.Minute, "bound of one tier")
	fs.StringVar(&c.profile, "heap-profile", "", "save the hollow process's heap profile, with its pods, to <file>.<nodes>")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	for _, s := range strings.Split(tiers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return c, fmt.Errorf("-nodes: %q is not a positive count", s)
		}
		c.tiers = append(c.tiers, n)
	}
	return c, nil
}

func main() {
	ctrllog.SetLogger(logr.Discard())
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchhollow:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var results []result
	for _, n := range cfg.tiers {
		r, err := runTier(ctx, cfg, n)
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchhollow: tier %d nodes: FAILED: %v\n", n, err)
			os.Exit(1)
		}
		results = append(results, r)
		r.print()
	}
	printTable(results)
}

// runTier measures one tier on a fresh control plane.
func runTier(ctx context.Context, cfg config, nodes int) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.limit)
	defer cancel()
	env := &envtest.Environment{}
	api := env.ControlPlane.GetAPIServer().Configure()
	api.Set("max-requests-inflight", "3000")
	api.Set("max-mutating-requests-inflight", "1000")
	restCfg, err := env.Start()
	if err != nil {
		return result{}, fmt.Errorf("control plane: %w", err)
	}
	defer func() { _ = env.Stop() }()
	restCfg.QPS, restCfg.Burst = 2000, 4000
	dir, err := os.MkdirTemp("", "benchhollow-")
	if err != nil {
		return result{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(restCfg, kubeconfig); err != nil {
		return result{}, err
	}
	cs := kubernetes.NewForConfigOrDie(restCfg)
	r := result{nodes: nodes, pods: nodes * cfg.podsPerNode}
	start := time.Now()
	args := []string{"hollow", "--kubeconfig", kubeconfig, "--nodes", strconv.Itoa(nodes), "--name-prefix", "hollow-"}
	if cfg.profile != "" {
		args = append(args, "--pprof-address", pprofAddress)
	}
	cmd := exec.CommandContext(ctx, cfg.nodelet, args...)
	cmd.Stdout, cmd.Stderr = nil, nil // the nodes' logs are not part of the figures
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	if err := waitNodesReady(ctx, cs, nodes); err != nil {
		return result{}, err
	}
	r.nodesReady = time.Since(start)
	if r.idleNodes, err = sample(ctx, pid, cfg.window); err != nil {
		return result{}, err
	}
	podsStart := time.Now()
	if err := runPods(ctx, cs, nodes, cfg.podsPerNode); err != nil {
		return result{}, err
	}
	r.podsRunning = time.Since(podsStart)
	if r.idlePods, err = sample(ctx, pid, cfg.window); err != nil {
		return result{}, err
	}
	if cfg.profile != "" {
		if err := saveHeapProfile(ctx, fmt.Sprintf("%s.%d", cfg.profile, nodes)); err != nil {
			return result{}, err
		}
	}
	return r, nil
}

// writeKubeconfig writes restCfg (envtest's admin, with certificate data) as a kubeconfig file.
func writeKubeconfig(c *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "admin"}
	kc.CurrentContext = "bench"
	return clientcmd.WriteToFile(*kc, path)
}

const pprofAddress = "127.0.0.1:6061"

// saveHeapProfile fetches the hollow process's heap profile, and its goroutine profile beside it.
func saveHeapProfile(ctx context.Context, path string) error {
	if err := fetch(ctx, "/debug/pprof/goroutine?debug=1", path+".goroutines.txt"); err != nil {
		return err
	}
	if err := fetch(ctx, "/debug/pprof/heap?debug=1", path+".txt"); err != nil {
		return err
	}
	return fetch(ctx, "/debug/pprof/heap", path)
}

func fetch(ctx context.Context, what, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pprofAddress+what, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
