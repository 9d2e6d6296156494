package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on Linux).
const clockTicks = 100

// usage is the hollow process over a sampling window.
type usage struct {
	rssBytes   int64
	cpuPerSec  float64 // CPU seconds per second over the window
	windowSecs float64
}

type result struct {
	nodes, pods             int
	nodesReady, podsRunning time.Duration
	idleNodes, idlePods     usage
}

func (r result) print() {
	fmt.Printf("BENCH hollow nodes=%d pods=%d nodes_ready=%.1fs pods_running=%.1fs rss_nodes=%.1fMiB rss_pods=%.1fMiB cpu_idle_nodes=%.3f cpu_idle_pods=%.3f per_node=%.2fMiB per_pod=%.1fKiB\n",
		r.nodes, r.pods, r.nodesReady.Seconds(), r.podsRunning.Seconds(), mib(r.idleNodes.rssBytes), mib(r.idlePods.rssBytes),
		r.idleNodes.cpuPerSec, r.idlePods.cpuPerSec, mib(r.idleNodes.rssBytes)/float64(r.nodes), r.perPodKiB())
}

func (r result) perPodKiB() float64 {
	return float64(r.idlePods.rssBytes-r.idleNodes.rssBytes) / 1024 / float64(r.pods)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// printTable prints all tiers, and the marginal cost of a node (with its pods) between the smallest and
// the largest tier, which leaves out the process's fixed cost.
func printTable(rs []result) {
	fmt.Println("| nodes | pods | all nodes Ready | all pods Running | RSS, nodes only | RSS, with pods | CPU idle (nodes / with pods) | RSS per node | RSS per pod |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		fmt.Printf("| %d | %d | %.1f s | %.1f s | %.0f MiB | %.0f MiB | %.2f / %.2f cores | %.2f MiB | %.1f KiB |\n",
			r.nodes, r.pods, r.nodesReady.Seconds(), r.podsRunning.Seconds(), mib(r.idleNodes.rssBytes), mib(r.idlePods.rssBytes),
			r.idleNodes.cpuPerSec, r.idlePods.cpuPerSec, mib(r.idleNodes.rssBytes)/float64(r.nodes), r.perPodKiB())
	}
	if len(rs) > 1 {
		a, b := rs[0], rs[len(rs)-1]
		dn := float64(b.nodes - a.nodes)
		fmt.Printf("BENCH hollow marginal per node (%d→%d nodes): %.2f MiB idle, %.2f MiB with its %d pods\n",
			a.nodes, b.nodes, mib(b.idleNodes.rssBytes-a.idleNodes.rssBytes)/dn, mib(b.idlePods.rssBytes-a.idlePods.rssBytes)/dn, b.pods/b.nodes)
	}
}

// waitNodesReady waits until n Nodes are Ready.
func waitNodesReady(ctx context.Context, cs kubernetes.Interface, n int) error {
	return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil //nolint:nilerr // the API server under load: try again
		}
		ready := 0
		for _, node := range nodes.Items {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= n, nil
	})
}

// runPods creates perNode pods bound to each hollow node and waits, through a watch, until all run.
func runPods(ctx context.Context, cs kubernetes.Interface, nodes, perNode int) error {
	pods := cs.CoreV1().Pods("default")
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return pods.Watch(ctx, o) },
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	if err := createPods(ctx, cs, nodes, perNode); err != nil {
		return err
	}
	want := nodes * perNode
	running := map[string]bool{}
	for len(running) < want {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d pods Running: %w", len(running), want, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch closed at %d of %d pods Running", len(running), want)
			}
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted && p.Status.Phase == corev1.PodRunning {
				running[p.Name] = true
			}
		}
	}
	return nil
}

func createPods(ctx context.Context, cs kubernetes.Interface, nodes, perNode int) error {
	jobs := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				p := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d-%d", i/perNode, i%perNode)},
					Spec: corev1.PodSpec{NodeName: fmt.Sprintf("hollow-%d", i/perNode),
						Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}},
				}
				if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range nodes * perNode {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return fmt.Errorf("create pods: %w", err)
	default:
		return nil
	}
}

// sample measures the process over window: its RSS at the end and its CPU use per second.
func sample(ctx context.Context, pid int, window time.Duration) (usage, error) {
	t0, err := cpuTicks(pid)
	if err != nil {
		return usage{}, err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return usage{}, ctx.Err()
	case <-time.After(window):
	}
	t1, err := cpuTicks(pid)
	if err != nil {
		return usage{}, err
	}
	rss, err := rssBytes(pid)
	if err != nil {
		return usage{}, err
	}
	secs := time.Since(start).Seconds()
	return usage{rssBytes: rss, cpuPerSec: float64(t1-t0) / clockTicks / secs, windowSecs: secs}, nil
}

// cpuTicks is the process's user + system CPU time in clock ticks (/proc/<pid>/stat fields 14 and 15).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after the command name
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return utime + stime, nil
}

// rssBytes is the process's resident set (VmRSS).
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
