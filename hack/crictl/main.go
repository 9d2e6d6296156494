// Command crictl is the test bed's small CRI client (cri-tools' crictl cannot be installed here). It speaks the
// CRI v1 API over a unix socket:
//
//	crictl -r unix:///path/containerd.sock version | info | pods | ps [-a] | images | pull IMAGE |
//	                                       rmp --all|ID... | rm --all|ID... | smoke
//
// smoke runs one sandbox and one busybox container end to end (pull, run, check RUNNING, the sandbox IP and the
// container log, then stop and remove everything): it proves containerd, runc, CNI and the registry work.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type client struct {
	rt      runtimeapi.RuntimeServiceClient
	img     runtimeapi.ImageServiceClient
	timeout time.Duration
}

type command func(ctx context.Context, c *client, args []string) error

var commands = map[string]command{
	"version": version,
	"info":    info,
	"pods":    pods,
	"ps":      ps,
	"images":  images,
	"pull":    pull,
	"rmp":     rmp,
	"rm":      rm,
	"smoke":   smoke,
}

func main() {
	endpoint := flag.String("r", envOr("CONTAINER_RUNTIME_ENDPOINT", "unix:///run/containerd/containerd.sock"),
		"CRI endpoint (unix:///path)")
	timeout := flag.Duration("t", 10*time.Second, "timeout of each RPC (pulls get 30x)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: crictl [-r unix:///sock] [-t 10s] version|info|pods|ps [-a]|images|pull IMAGE|"+
			"rmp --all|ID...|rm --all|ID...|smoke [flags]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	cmd, ok := commands[flag.Arg(0)]
	if !ok {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*endpoint, *timeout, cmd, flag.Args()[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "crictl %s: %v\n", flag.Arg(0), err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func run(endpoint string, timeout time.Duration, cmd command, args []string) error {
	if !strings.HasPrefix(endpoint, "unix://") {
		endpoint = "unix://" + endpoint
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		return fmt.Errorf("connect %s: %w", endpoint, err)
	}
	defer conn.Close()
	c := &client{rt: runtimeapi.NewRuntimeServiceClient(conn), img: runtimeapi.NewImageServiceClient(conn), timeout: timeout}
	return cmd(context.Background(), c, args)
}

// call gives one RPC its own deadline.
func (c *client) call(ctx context.Context, scale int) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout*time.Duration(scale))
}

func version(ctx context.Context, c *client, _ []string) error {
	ctx, cancel := c.call(ctx, 1)
	defer cancel()
	v, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return err
	}
	fmt.Printf("Version:  %s\nRuntimeName:  %s\nRuntimeVersion:  %s\nRuntimeApiVersion:  %s\n",
		v.Version, v.RuntimeName, v.RuntimeVersion, v.RuntimeApiVersion)
	return nil
}

func info(ctx context.Context, c *client, _ []string) error {
	ctx, cancel := c.call(ctx, 1)
	defer cancel()
	s, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return err
	}
	w := table("CONDITION", "STATUS", "REASON", "MESSAGE")
	notReady := 0
	for _, cond := range s.GetStatus().GetConditions() {
		fmt.Fprintf(w, "%s\t%t\t%s\t%s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		if !cond.Status {
			notReady++
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if notReady > 0 {
		return fmt.Errorf("%d condition(s) not true", notReady)
	}
	return nil
}

func pods(ctx context.Context, c *client, _ []string) error {
	list, err := c.listSandboxes(ctx)
	if err != nil {
		return err
	}
	w := table("POD ID", "CREATED", "STATE", "NAME", "NAMESPACE", "ATTEMPT")
	for _, p := range list {
		m := p.GetMetadata()
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", short(p.Id), age(p.CreatedAt), p.State, m.GetName(),
			m.GetNamespace(), m.GetAttempt())
	}
	return w.Flush()
}

func ps(ctx context.Context, c *client, args []string) error {
	fs := flag.NewFlagSet("ps", flag.ContinueOnError)
	all := fs.Bool("a", false, "show all containers, not only running ones")
	if err := fs.Parse(args); err != nil {
		return err
	}
	list, err := c.listContainers(ctx, !*all)
	if err != nil {
		return err
	}
	w := table("CONTAINER", "IMAGE", "CREATED", "STATE", "NAME", "ATTEMPT", "POD ID")
	for _, ctr := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", short(ctr.Id), ctr.GetImage().GetImage(), age(ctr.CreatedAt),
			ctr.State, ctr.GetMetadata().GetName(), ctr.GetMetadata().GetAttempt(), short(ctr.PodSandboxId))
	}
	return w.Flush()
}

func images(ctx context.Context, c *client, _ []string) error {
	ctx, cancel := c.call(ctx, 1)
	defer cancel()
	resp, err := c.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return err
	}
	w := table("IMAGE", "IMAGE ID", "SIZE", "PINNED")
	for _, im := range resp.Images {
		names := im.RepoTags
		if len(names) == 0 {
			names = im.RepoDigests
		}
		id := strings.TrimPrefix(im.Id, "sha256:")
		fmt.Fprintf(w, "%s\t%s\t%.1fMB\t%t\n", strings.Join(names, ","), short(id), float64(im.Size)/1e6, im.Pinned)
	}
	return w.Flush()
}

func pull(ctx context.Context, c *client, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: pull IMAGE")
	}
	ref, err := c.pull(ctx, args[0], nil)
	if err != nil {
		return err
	}
	fmt.Printf("Image is up to date for %s\n", ref)
	return nil
}

func (c *client) pull(ctx context.Context, image string, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := c.call(ctx, 30)
	defer cancel()
	resp, err := c.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image},
		SandboxConfig: sandbox})
	if err != nil {
		return "", fmt.Errorf("pull %s: %w", image, err)
	}
	return resp.ImageRef, nil
}

// rmp stops and removes sandboxes (all of them with --all): stopping first lets CNI tear the network down.
func rmp(ctx context.Context, c *client, args []string) error {
	ids, err := idsOrAll(args, "rmp", func() ([]string, error) {
		list, err := c.listSandboxes(ctx)
		ids := make([]string, 0, len(list))
		for _, p := range list {
			ids = append(ids, p.Id)
		}
		return ids, err
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if err := c.removeSandbox(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Printf("Removed sandbox %s\n", short(id))
	}
	return errors.Join(errs...)
}

// rm stops and removes containers (all of them with --all).
func rm(ctx context.Context, c *client, args []string) error {
	ids, err := idsOrAll(args, "rm", func() ([]string, error) {
		list, err := c.listContainers(ctx, false)
		ids := make([]string, 0, len(list))
		for _, ctr := range list {
			ids = append(ids, ctr.Id)
		}
		return ids, err
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if err := c.removeContainer(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Printf("Removed container %s\n", short(id))
	}
	return errors.Join(errs...)
}

func idsOrAll(args []string, name string, all func() ([]string, error)) ([]string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	wantAll := fs.Bool("all", false, "every one the runtime knows")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *wantAll {
		return all()
	}
	if fs.NArg() == 0 {
		return nil, fmt.Errorf("usage: %s --all or one or more IDs", name)
	}
	return fs.Args(), nil
}

func (c *client) listSandboxes(ctx context.Context) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := c.call(ctx, 1)
	defer cancel()
	resp, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	return resp.GetItems(), err
}

func (c *client) listContainers(ctx context.Context, runningOnly bool) ([]*runtimeapi.Container, error) {
	ctx, cancel := c.call(ctx, 1)
	defer cancel()
	req := &runtimeapi.ListContainersRequest{}
	if runningOnly {
		req.Filter = &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{
			State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	}
	resp, err := c.rt.ListContainers(ctx, req)
	return resp.GetContainers(), err
}

func (c *client) removeSandbox(ctx context.Context, id string) error {
	sctx, cancel := c.call(ctx, 3)
	defer cancel()
	if _, err := c.rt.StopPodSandbox(sctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", short(id), err)
	}
	rctx, cancel2 := c.call(ctx, 3)
	defer cancel2()
	if _, err := c.rt.RemovePodSandbox(rctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", short(id), err)
	}
	return nil
}

func (c *client) removeContainer(ctx context.Context, id string) error {
	sctx, cancel := c.call(ctx, 3)
	defer cancel()
	if _, err := c.rt.StopContainer(sctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0}); err != nil {
		return fmt.Errorf("stop container %s: %w", short(id), err)
	}
	rctx, cancel2 := c.call(ctx, 3)
	defer cancel2()
	if _, err := c.rt.RemoveContainer(rctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		return fmt.Errorf("remove container %s: %w", short(id), err)
	}
	return nil
}

func table(cols ...string) *tabwriter.Writer {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, strings.Join(cols, "\t"))
	return w
}

func short(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}

func age(unixNano int64) string {
	return time.Since(time.Unix(0, unixNano)).Truncate(time.Second).String() + " ago"
}
