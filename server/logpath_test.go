package server

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podrules/podrulestest"
	"github.com/nodelet/nodelet/runtime"
)

const testLogsDir = "/var/log/pods"

func logStatus(name, logPath, restarts string) *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: name}, LogPath: logPath,
		Annotations: map[string]string{runtime.AnnotationContainerRestartCount: restarts}}
}

// TestContainerLogFileRefusesHostileIdentifiers: a pod namespace, name or UID, or a container name (from
// the runtime's metadata), that cannot be a path segment never becomes a log file path.
func TestContainerLogFileRefusesHostileIdentifiers(t *testing.T) {
	for _, h := range podrulestest.HostileSegments() {
		t.Run(h.Name, func(t *testing.T) {
			for _, field := range []string{"namespace", "name", "uid", "container"} {
				pod := testPod("web", "u1")
				name := "app"
				switch field {
				case "namespace":
					pod.Namespace = h.Value
				case "name":
					pod.Name = h.Value
				case "uid":
					pod.UID = types.UID(h.Value)
				case "container":
					name = h.Value
				}
				p, err := containerLogFile(testLogsDir, &pod, logStatus(name, "", "0"))
				if err == nil || p != "" || !errors.Is(err, podrules.ErrUnsafePathSegment) && errorStatus(err) != 400 {
					t.Errorf("hostile %s: %q, %v; want no path", field, p, err)
				}
			}
		})
	}
}

// TestContainerLogFileStaysInThePodLogsDir: a log path the runtime reports is used only inside the pod
// logs directory.
func TestContainerLogFileStaysInThePodLogsDir(t *testing.T) {
	pod := testPod("web", "u1")
	for _, tc := range []struct {
		logPath string
		ok      bool
	}{
		{"/var/log/pods/default_web_u1/app/0.log", true},
		{"/var/log/pods/other/x.log", true}, // the runtime's own layout, still a pod log
		{"/etc/shadow", false},
		{"/var/log/pods/../../../etc/shadow", false},
		{"/var/log/pods", false},
		{"/var/log/pods/", false},
		{"/var/log/podsx/a.log", false},
		{"relative/0.log", false},
		{"../0.log", false},
		{"/var/log/pods/a\x00b", false},
	} {
		p, err := containerLogFile(testLogsDir, &pod, logStatus("app", tc.logPath, "0"))
		if tc.ok != (err == nil) || (err == nil && p != tc.logPath) {
			t.Errorf("log path %q: %q, %v; want ok=%v", tc.logPath, p, err, tc.ok)
		}
		if err != nil && errorStatus(err) != 403 {
			t.Errorf("log path %q: status %d, want 403", tc.logPath, errorStatus(err))
		}
	}
	p, err := containerLogFile(testLogsDir, &pod, logStatus("app", "", "3"))
	if err != nil || p != "/var/log/pods/default_web_u1/app/3.log" {
		t.Errorf("no runtime log path: %q, %v; want the kubelet's layout", p, err)
	}
	p, err = containerLogFile(testLogsDir, &pod, logStatus("app", "", "-2"))
	if err == nil {
		t.Errorf("a negative restart count annotation: %q, want an error", p)
	}
}

// FuzzContainerLogFile: whatever the pod's identifiers and whatever the runtime reports (log path,
// container name, restart count annotation), the resolved log file lies strictly inside the pod logs
// directory, or there is none. CI: go test -run=^$ -fuzz=FuzzContainerLogFile -fuzztime=10s ./server/
func FuzzContainerLogFile(f *testing.F) {
	f.Add("default", "web", "u1", "app", "", "0")
	f.Add("default", "web", "u1", "app", "/var/log/pods/default_web_u1/app/0.log", "1")
	f.Add("..", "..", "..", "..", "", "0")
	f.Add("default", "web", "../../..", "app", "", "0")
	f.Add("default", "web", "u1", "../../etc", "", "-1")
	f.Add("default", "web", "u1", "app", "/var/log/pods/../../../etc/shadow", "0")
	f.Add("default", "web", "u1", "app", "/var/log/pods/./x/../../pods2/a", "0")
	f.Add("a\x00b", "web", "u1", "app", "", "99999999999999999999")
	for _, h := range podrulestest.HostileSegments() {
		f.Add("default", h.Value, "u1", h.Value, "", "0")
	}
	f.Fuzz(func(t *testing.T, ns, name, uid, container, logPath, restarts string) {
		pod := corev1.Pod{}
		pod.Namespace, pod.Name, pod.UID = ns, name, types.UID(uid)
		p, err := containerLogFile(testLogsDir, &pod, logStatus(container, logPath, restarts))
		if err != nil {
			if p != "" {
				t.Fatalf("path %q with error %v", p, err)
			}
			return
		}
		rel, rerr := filepath.Rel(testLogsDir, p)
		if rerr != nil || !filepath.IsLocal(rel) || rel == "." || strings.ContainsRune(p, 0) {
			t.Fatalf("containerLogFile(%q, %q, %q, %q, %q) = %q: outside %s", ns, name, uid, container, logPath, p, testLogsDir)
		}
		if logPath == "" {
			n, err := strconv.Atoi(restarts)
			if err != nil {
				n = 0 // an unreadable annotation counts as the first attempt
			}
			want := filepath.Join(testLogsDir, ns+"_"+name+"_"+uid, container, strconv.Itoa(n)+".log")
			if p != want || strings.Count(rel, string(filepath.Separator)) != 2 {
				t.Fatalf("containerLogFile(%q, %q, %q, %q) = %q, want %q", ns, name, uid, container, p, want)
			}
		}
	})
}

// FuzzChooseAttempt: whatever a user writes into the pod's status — container IDs, states, the last
// termination — the attempt whose log is read is one of the pod container's own attempts, or none.
// CI: go test -run=^$ -fuzz=FuzzChooseAttempt -fuzztime=10s ./server/
func FuzzChooseAttempt(f *testing.F) {
	f.Add("containerd://c2", "containerd://c1", uint8(0), uint8(2), false)
	f.Add("containerd://c9", "containerd://c9", uint8(1), uint8(2), true)
	f.Add("c1", "", uint8(2), uint8(1), false)
	f.Add("://", "docker://c2", uint8(3), uint8(0), true)
	f.Add("", "containerd://", uint8(0), uint8(3), false)
	f.Fuzz(func(t *testing.T, id, lastID string, state, attempts uint8, previous bool) {
		cs := corev1.ContainerStatus{Name: "app", ContainerID: id}
		switch state % 4 {
		case 0:
			cs.State.Running = &corev1.ContainerStateRunning{}
		case 1:
			cs.State.Terminated = &corev1.ContainerStateTerminated{ContainerID: id}
		case 2:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: id}
		}
		if lastID != "" {
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ContainerID: lastID}
		}
		pod := testPod("web", "u1")
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		own := map[string]bool{}
		var list []*runtimeapi.Container
		for i := range int(attempts % 4) {
			cid := "c" + strconv.Itoa(int(attempts%4)-i)
			own[cid] = true
			list = append(list, &runtimeapi.Container{Id: cid})
		}
		got, err := chooseAttempt(&pod, "app", list, previous)
		if err == nil && !own[got] {
			t.Fatalf("chooseAttempt(status %q/%q state %d, %d attempts, previous %v) = %q: not one of the pod's attempts",
				id, lastID, state%4, len(list), previous, got)
		}
		if err != nil && got != "" {
			t.Fatalf("chooseAttempt = %q with error %v", got, err)
		}
	})
}
