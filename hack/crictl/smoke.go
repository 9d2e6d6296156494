package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// smokeRun holds one smoke test's settings and the IDs it must clean up.
type smokeRun struct {
	c          *client
	image      string
	ipPrefix   string
	logDir     string
	sandbox    *runtimeapi.PodSandboxConfig
	sandboxID  string
	containers []string
	start      time.Time
}

func smoke(ctx context.Context, c *client, args []string) error {
	fs := flag.NewFlagSet("smoke", flag.ContinueOnError)
	image := fs.String("image", "docker.io/library/busybox:latest", "container image")
	ipPrefix := fs.String("ip-prefix", "10.88.", "the sandbox IP must start with this")
	logDir := fs.String("log-dir", "", "pod log directory (default: a temporary one, removed after)")
	keep := fs.Bool("keep", false, "leave the sandbox and container running (to test teardown)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s := &smokeRun{c: c, image: *image, ipPrefix: *ipPrefix, logDir: *logDir, start: time.Now()}
	if s.logDir == "" && *keep {
		return errors.New("--keep needs --log-dir")
	}
	if s.logDir == "" {
		d, err := os.MkdirTemp("", "crictl-smoke-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		s.logDir = d
	}
	err := s.run(ctx)
	if *keep && err == nil {
		fmt.Printf("smoke: PASS, sandbox %s left running\n", s.sandboxID)
		return nil
	}
	if cerr := s.cleanup(context.WithoutCancel(ctx)); cerr != nil {
		err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
	}
	if err != nil {
		return err
	}
	fmt.Printf("smoke: PASS in %s\n", time.Since(s.start).Round(time.Millisecond))
	return nil
}

func (s *smokeRun) step(format string, a ...any) {
	fmt.Printf("%7s  %s\n", time.Since(s.start).Round(time.Millisecond), fmt.Sprintf(format, a...))
}

func (s *smokeRun) run(ctx context.Context) error {
	uid := fmt.Sprintf("smoke-%d", time.Now().UnixNano())
	s.sandbox = &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "crictl-smoke", Namespace: "default", Uid: uid},
		Hostname:     "crictl-smoke",
		LogDirectory: s.logDir,
		Labels:       map[string]string{"io.kubernetes.pod.name": "crictl-smoke", "nodelet.io/smoke": "true"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD,
				Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}}},
	}
	ref, err := s.c.pull(ctx, s.image, s.sandbox)
	if err != nil {
		return err
	}
	s.step("pulled %s (%s)", s.image, short(strings.TrimPrefix(ref, "sha256:")))
	if err := s.runSandbox(ctx); err != nil {
		return err
	}
	id, err := s.startContainer(ctx, ref)
	if err != nil {
		return err
	}
	return s.checkLog(ctx, id)
}

func (s *smokeRun) runSandbox(ctx context.Context) error {
	rctx, cancel := s.c.call(ctx, 6)
	defer cancel()
	resp, err := s.c.rt.RunPodSandbox(rctx, &runtimeapi.RunPodSandboxRequest{Config: s.sandbox})
	if err != nil {
		return fmt.Errorf("run sandbox: %w", err)
	}
	s.sandboxID = resp.PodSandboxId
	sctx, cancel2 := s.c.call(ctx, 1)
	defer cancel2()
	st, err := s.c.rt.PodSandboxStatus(sctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: s.sandboxID})
	if err != nil {
		return fmt.Errorf("sandbox status: %w", err)
	}
	ip := st.GetStatus().GetNetwork().GetIp()
	s.step("sandbox %s %s ip=%s", short(s.sandboxID), st.GetStatus().GetState(), ip)
	if st.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		return fmt.Errorf("sandbox state %s, want SANDBOX_READY", st.GetStatus().GetState())
	}
	if !strings.HasPrefix(ip, s.ipPrefix) {
		return fmt.Errorf("sandbox IP %q does not start with %q", ip, s.ipPrefix)
	}
	return nil
}

func (s *smokeRun) startContainer(ctx context.Context, imageRef string) (string, error) {
	cctx, cancel := s.c.call(ctx, 3)
	defer cancel()
	resp, err := s.c.rt.CreateContainer(cctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: s.sandboxID,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "busybox"},
			Image:    &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: s.image},
			Command:  []string{"sh", "-c", "echo hi; sleep 1000"},
			LogPath:  "busybox/0.log",
			Linux:    &runtimeapi.LinuxContainerConfig{},
		},
		SandboxConfig: s.sandbox,
	})
	if err != nil {
		return "", fmt.Errorf("create container: %w", err)
	}
	id := resp.ContainerId
	s.containers = append(s.containers, id)
	sctx, cancel2 := s.c.call(ctx, 3)
	defer cancel2()
	if _, err := s.c.rt.StartContainer(sctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		return "", fmt.Errorf("start container: %w", err)
	}
	stctx, cancel3 := s.c.call(ctx, 1)
	defer cancel3()
	st, err := s.c.rt.ContainerStatus(stctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		return "", fmt.Errorf("container status: %w", err)
	}
	s.step("container %s %s", short(id), st.GetStatus().GetState())
	if st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return "", fmt.Errorf("container state %s, want CONTAINER_RUNNING", st.GetStatus().GetState())
	}
	return id, nil
}

// checkLog waits (bounded) for the container's "hi" to reach its CRI log file.
func (s *smokeRun) checkLog(ctx context.Context, id string) error {
	path := filepath.Join(s.logDir, "busybox", "0.log")
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), " stdout F hi") {
			s.step("log %s: %s", path, strings.TrimSpace(string(b)))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("container %s: no \"hi\" in %s after 5s (read: %q): %w", short(id), path, b, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *smokeRun) cleanup(ctx context.Context) error {
	var errs []error
	for _, id := range s.containers {
		errs = append(errs, s.c.removeContainer(ctx, id))
	}
	if s.sandboxID != "" {
		errs = append(errs, s.c.removeSandbox(ctx, s.sandboxID))
		s.step("stopped and removed sandbox %s", short(s.sandboxID))
	}
	return errors.Join(errs...)
}
