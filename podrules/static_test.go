package podrules

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func annotated(kv ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	if len(kv) > 0 {
		p.Annotations = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		p.Annotations[kv[i]] = kv[i+1]
	}
	return p
}

func TestIsStaticPodAndIsMirrorPod(t *testing.T) {
	tests := []struct {
		name       string
		pod        *corev1.Pod
		wantStatic bool
		wantMirror bool
	}{
		{name: "nil pod", pod: nil},
		{name: "no annotations", pod: annotated()},
		{name: "API source", pod: annotated(ConfigSourceAnnotation, ConfigSourceAPI)},
		{name: "file source", pod: annotated(ConfigSourceAnnotation, ConfigSourceFile), wantStatic: true},
		{name: "http source", pod: annotated(ConfigSourceAnnotation, ConfigSourceHTTP), wantStatic: true},
		{name: "any source but the API", pod: annotated(ConfigSourceAnnotation, "*"), wantStatic: true},
		{name: "mirror pod carrying its static pod's source", wantMirror: true,
			pod: annotated(ConfigSourceAnnotation, ConfigSourceFile, ConfigMirrorAnnotation, "h")},
		{name: "mirror annotation with an empty hash", pod: annotated(ConfigMirrorAnnotation, ""), wantMirror: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsStaticPod(tt.pod); got != tt.wantStatic {
				t.Errorf("IsStaticPod = %v, want %v", got, tt.wantStatic)
			}
			if got := IsMirrorPod(tt.pod); got != tt.wantMirror {
				t.Errorf("IsMirrorPod = %v, want %v", got, tt.wantMirror)
			}
		})
	}
}

func TestIsMirrorOf(t *testing.T) {
	static := annotated(ConfigSourceAnnotation, ConfigSourceFile, ConfigHashAnnotation, "h1")
	elsewhere := annotated(ConfigMirrorAnnotation, "h1")
	elsewhere.Namespace = "other"
	tests := []struct {
		name   string
		mirror *corev1.Pod
		static *corev1.Pod
		want   bool
	}{
		{name: "current mirror", mirror: annotated(ConfigMirrorAnnotation, "h1"), static: static, want: true},
		{name: "stale mirror", mirror: annotated(ConfigMirrorAnnotation, "h0"), static: static},
		{name: "an API pod of the same name", mirror: annotated(), static: static},
		{name: "another namespace", mirror: elsewhere, static: static},
		{name: "no static pod", mirror: annotated(ConfigMirrorAnnotation, "h1")},
		{name: "no mirror pod", static: static},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsMirrorOf(tt.mirror, tt.static); got != tt.want {
				t.Errorf("IsMirrorOf = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsCriticalPod(t *testing.T) {
	prio := func(p int32) *corev1.Pod { return &corev1.Pod{Spec: corev1.PodSpec{Priority: &p}} }
	static := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{ConfigSourceAnnotation: ConfigSourceFile}}}
	mirror := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{ConfigMirrorAnnotation: "h"}}}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"static": {static, true}, "mirror": {mirror, true},
		"system-cluster-critical": {prio(2000000000), true}, "system-node-critical": {prio(2000001000), true},
		"high user priority": {prio(1000000000), false}, "no priority": {&corev1.Pod{}, false},
	} {
		if got := IsCriticalPod(tc.pod); got != tc.want {
			t.Errorf("%s: IsCriticalPod = %v, want %v", name, got, tc.want)
		}
	}
}

func TestIsNodeCriticalPod(t *testing.T) {
	pod := func(prio int32, class string, source string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{ConfigSourceAnnotation: source}},
			Spec: corev1.PodSpec{Priority: &prio, PriorityClassName: class}}
	}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"static, system-node-critical":                 {pod(0, SystemNodeCritical, ConfigSourceFile), true},
		"by priority, system-node-critical":            {pod(2000001000, SystemNodeCritical, ConfigSourceAPI), true},
		"static, another class":                        {pod(0, "system-cluster-critical", ConfigSourceFile), false},
		"API pod below critical, system-node-critical": {pod(0, SystemNodeCritical, ConfigSourceAPI), false},
	} {
		if got := IsNodeCriticalPod(tc.pod); got != tc.want {
			t.Errorf("%s: IsNodeCriticalPod = %v, want %v", name, got, tc.want)
		}
	}
}

func TestMarkFromAPI(t *testing.T) {
	for _, claimed := range []*corev1.Pod{
		annotated(),
		annotated(ConfigSourceAnnotation, ConfigSourceFile),
		annotated(ConfigSourceAnnotation, ConfigSourceHTTP),
		annotated(ConfigSourceAnnotation, "*", "other", "kept"),
	} {
		MarkFromAPI(claimed)
		if IsStaticPod(claimed) || IsCriticalPod(claimed) {
			t.Errorf("a pod read from the API is static or critical after MarkFromAPI: %v", claimed.Annotations)
		}
		if got := claimed.Annotations[ConfigSourceAnnotation]; got != ConfigSourceAPI {
			t.Errorf("config.source = %q, want %q", got, ConfigSourceAPI)
		}
	}
	mirror := annotated(ConfigSourceAnnotation, ConfigSourceFile, ConfigMirrorAnnotation, "h")
	MarkFromAPI(mirror)
	if !IsMirrorPod(mirror) {
		t.Error("a mirror pod read from the API is still a mirror pod")
	}
}
