package simnode

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestParseScript(t *testing.T) {
	tests := []struct {
		in      string
		want    Script
		wantErr bool
	}{
		{in: "exit=0,after=2s", want: Script{ExitCode: 0, After: 2 * time.Second}},
		{in: "after=1500ms, exit=1", want: Script{ExitCode: 1, After: 1500 * time.Millisecond}},
		{in: "exit=1", wantErr: true},
		{in: "after=1s", wantErr: true},
		{in: "exit=256,after=1s", wantErr: true},
		{in: "exit=-1,after=1s", wantErr: true},
		{in: "exit=0,after=0s", wantErr: true},
		{in: "exit=0,after=soon", wantErr: true},
		{in: "exit=0,after=1s,signal=9", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseScript(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseScript(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestBehaviourFromAnnotations(t *testing.T) {
	sandbox := &runtimeapi.PodSandboxConfig{Annotations: map[string]string{
		AnnotationPrefix + "job": "exit=3,after=1s",
		AnnotationPrefix + "bad": "exit=x",
	}}
	ctr := func(name string) *runtimeapi.ContainerConfig {
		return &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}}
	}
	if b, ok := behaviour(sandbox, ctr("job")); !ok || b.ExitCode != 3 || b.ExitAfter != time.Second {
		t.Errorf("job: %+v %v", b, ok)
	}
	if b, ok := behaviour(sandbox, ctr("web")); !ok || b.ExitAfter != 0 || b.StartError != "" {
		t.Errorf("unscripted container must run until stopped: %+v %v", b, ok)
	}
	if b, _ := behaviour(sandbox, ctr("bad")); b.StartError == "" {
		t.Errorf("a bad script must fail the start with its parse error: %+v", b)
	}
}

// A container's logs, exec answers and usage come from its annotations; a malformed one fails its start.
func TestLogsExecAndUsageFromAnnotations(t *testing.T) {
	sandbox := &runtimeapi.PodSandboxConfig{Annotations: map[string]string{
		AnnotationPrefix + "web.logs":    "one\ntwo\n",
		AnnotationPrefix + "web.exec":    `{"cat /etc/hostname": "web\n"}`,
		AnnotationPrefix + "web.usage":   "cpu=250m,memory=64Mi",
		AnnotationPrefix + "bad.exec":    `["not", "an object"]`,
		AnnotationPrefix + "worse.usage": "cpu=lots",
	}}
	ctr := func(name string) *runtimeapi.ContainerConfig {
		return &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}}
	}
	b, ok := behaviour(sandbox, ctr("web"))
	if !ok || b.Logs != "one\ntwo\n" || b.Exec["cat /etc/hostname"] != "web\n" || b.CPUNanoCores != 250_000_000 ||
		b.MemoryBytes != 64<<20 || b.StartError != "" {
		t.Errorf("web: %+v %v", b, ok)
	}
	for _, name := range []string{"bad", "worse"} {
		if b, _ := behaviour(sandbox, ctr(name)); b.StartError == "" {
			t.Errorf("%s: a malformed annotation must fail the start: %+v", name, b)
		}
	}
}

func TestProbe(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		AnnotationPrefix + "a.ready": "false", AnnotationPrefix + "b.live": "false",
	}}}
	for _, tt := range []struct {
		container, kind string
		want            bool
	}{
		{"a", "Readiness", false}, {"a", "Liveness", true}, {"a", "Startup", true},
		{"b", "Readiness", true}, {"b", "Liveness", false}, {"c", "Readiness", true},
	} {
		if got := probe(pod, tt.container, tt.kind); got != tt.want {
			t.Errorf("probe(%s, %s) = %v, want %v", tt.container, tt.kind, got, tt.want)
		}
	}
}
