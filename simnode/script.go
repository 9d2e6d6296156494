package simnode

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/fake"
)

// AnnotationPrefix starts every annotation a test node reads.
const AnnotationPrefix = "testnode.nodelet.io/"

// Script is what a container does, parsed from "exit=<code>,after=<duration>".
type Script struct {
	ExitCode int32
	After    time.Duration
}

// ParseScript parses a container's script annotation; both keys are required.
func ParseScript(s string) (Script, error) {
	var sc Script
	var haveExit, haveAfter bool
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Script{}, fmt.Errorf("testnode script %q: %q is not key=value", s, part)
		}
		switch k {
		case "exit":
			code, err := strconv.ParseInt(v, 10, 32)
			if err != nil || code < 0 || code > 255 {
				return Script{}, fmt.Errorf("testnode script %q: exit code %q is not 0-255", s, v)
			}
			sc.ExitCode, haveExit = int32(code), true
		case "after":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return Script{}, fmt.Errorf("testnode script %q: after %q is not a positive duration", s, v)
			}
			sc.After, haveAfter = d, true
		default:
			return Script{}, fmt.Errorf("testnode script %q: unknown key %q (want exit, after)", s, k)
		}
	}
	if !haveExit || !haveAfter {
		return Script{}, fmt.Errorf("testnode script %q: want exit=<code>,after=<duration>", s)
	}
	return sc, nil
}

// behaviour scripts a container of the simulated runtime from its pod's annotations, which the sandbox
// carries. A script that does not parse makes the container fail to start, with the parse error as the
// reason — visible in the pod's status as the kubelet shows a start error.
func behaviour(sandbox *runtimeapi.PodSandboxConfig, c *runtimeapi.ContainerConfig) (fake.Behaviour, bool) {
	v, ok := sandbox.GetAnnotations()[AnnotationPrefix+c.GetMetadata().GetName()]
	if !ok {
		return fake.Behaviour{}, true // runs until stopped
	}
	sc, err := ParseScript(v)
	if err != nil {
		return fake.Behaviour{StartError: err.Error()}, true
	}
	return fake.Behaviour{ExitAfter: sc.After, ExitCode: sc.ExitCode}, true
}

// probe answers a container's probes: every probe succeeds unless the pod's annotation
// "<container>.ready" (readiness, which then holds the container unready even without a readiness
// probe) or "<container>.live" (liveness) is "false".
func probe(pod *corev1.Pod, container, kind string) bool {
	var key string
	switch kind {
	case "Readiness":
		key = container + ".ready"
	case "Liveness":
		key = container + ".live"
	default:
		return true
	}
	return pod.Annotations[AnnotationPrefix+key] != "false"
}
