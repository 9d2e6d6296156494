package fake_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/nodelet/nodelet/runtime/fake"
)

// A container's behaviour scripts what it logs, what its commands answer (ExecSync, and exec through the
// streaming server with WithStreaming, exit codes included) and the usage it reports.
func TestScriptedLogsExecAndUsage(t *testing.T) {
	e := start(t, fake.WithStreaming(), fake.WithBehaviourFunc(func(_ *runtimeapi.PodSandboxConfig, c *runtimeapi.ContainerConfig) (fake.Behaviour, bool) {
		return fake.Behaviour{Logs: "hello\nworld\n", Exec: map[string]string{"cat /etc/hostname": "web\n"},
			CPUNanoCores: 250_000_000, MemoryBytes: 64 << 20}, c.GetMetadata().GetName() == "app"
	}))
	cfg := sandboxConfig("web", nil)
	cfg.LogDirectory = t.TempDir()
	sb, err := e.rc.RunPodSandbox(e.ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	cr, err := e.rc.CreateContainer(e.ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.GetPodSandboxId(),
		Config: containerConfig("app", nil), SandboxConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	id := cr.GetContainerId()
	if _, err := e.rc.StartContainer(e.ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}

	log, err := os.ReadFile(filepath.Join(cfg.LogDirectory, "app", "0.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\S+ stdout F hello\n\S+ stdout F world\n$`).Match(log) {
		t.Errorf("log file %q, want two CRI stdout entries", log)
	}

	res, err := e.rc.ExecSync(e.ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"cat", "/etc/hostname"}})
	if err != nil || string(res.GetStdout()) != "web\n" || res.GetExitCode() != 0 {
		t.Errorf("ExecSync = %v, %v; want web", res, err)
	}
	res, err = e.rc.ExecSync(e.ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"ls"}})
	if err != nil || string(res.GetStderr()) != "ls: not found\n" || res.GetExitCode() != 127 {
		t.Errorf("ExecSync(ls) = %v, %v; want exit 127", res, err)
	}

	st, err := e.rc.ContainerStats(e.ctx, &runtimeapi.ContainerStatsRequest{ContainerId: id})
	if err != nil || st.GetStats().GetCpu().GetUsageNanoCores().GetValue() != 250_000_000 ||
		st.GetStats().GetMemory().GetWorkingSetBytes().GetValue() != 64<<20 {
		t.Errorf("ContainerStats = %v, %v; want 250m CPU and 64Mi", st, err)
	}

	exec := func(cmd ...string) (string, error) {
		resp, err := e.rc.Exec(e.ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd, Stdout: true, Stderr: true})
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(resp.GetUrl())
		if err != nil {
			t.Fatal(err)
		}
		x, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: u.Host}, http.MethodPost, u)
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		err = x.StreamWithContext(e.ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
		return out.String() + errOut.String(), err
	}
	if out, err := exec("cat", "/etc/hostname"); err != nil || out != "web\n" {
		t.Errorf("exec = %q, %v; want web", out, err)
	}
	out, err := exec("ls")
	var exitErr utilexec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 127 || out != "ls: not found\n" {
		t.Errorf("exec(ls) = %q, %v; want exit 127", out, err)
	}
}
