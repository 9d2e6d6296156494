package simnode

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
// The annotations "<container>.logs" (what it writes to stdout when it starts), "<container>.exec" (a JSON
// object from a command line to its output; any other command exits 127) and "<container>.usage"
// ("cpu=<quantity>,memory=<quantity>", what it reports using) script the rest of it.
func behaviour(sandbox *runtimeapi.PodSandboxConfig, c *runtimeapi.ContainerConfig) (fake.Behaviour, bool) {
	ann := sandbox.GetAnnotations()
	name := c.GetMetadata().GetName()
	var b fake.Behaviour
	if v, ok := ann[AnnotationPrefix+name]; ok {
		sc, err := ParseScript(v)
		if err != nil {
			return fake.Behaviour{StartError: err.Error()}, true
		}
		b.ExitAfter, b.ExitCode = sc.After, sc.ExitCode
	}
	b.Logs = ann[AnnotationPrefix+name+".logs"]
	if v, ok := ann[AnnotationPrefix+name+".exec"]; ok {
		if err := json.Unmarshal([]byte(v), &b.Exec); err != nil {
			return fake.Behaviour{StartError: fmt.Sprintf("testnode exec script %q: want a JSON object of command line to output: %v", v, err)}, true
		}
	}
	if v, ok := ann[AnnotationPrefix+name+".usage"]; ok {
		cpu, mem, err := ParseUsage(v)
		if err != nil {
			return fake.Behaviour{StartError: err.Error()}, true
		}
		b.CPUNanoCores, b.MemoryBytes = cpu, mem
	}
	return b, true // without an exit script, runs until stopped
}

// ParseUsage parses a container's usage annotation, "cpu=<quantity>,memory=<quantity>" (either may be left out):
// CPU in nanocores, memory in bytes.
func ParseUsage(s string) (cpuNanoCores, memoryBytes uint64, err error) {
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return 0, 0, fmt.Errorf("testnode usage %q: %q is not key=value", s, part)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() < 0 {
			return 0, 0, fmt.Errorf("testnode usage %q: %q is not a quantity", s, v)
		}
		switch k {
		case "cpu":
			cpuNanoCores = uint64(q.ScaledValue(resource.Nano))
		case "memory":
			memoryBytes = uint64(q.Value())
		default:
			return 0, 0, fmt.Errorf("testnode usage %q: unknown key %q (want cpu, memory)", s, k)
		}
	}
	return cpuNanoCores, memoryBytes, nil
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
