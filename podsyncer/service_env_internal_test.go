package podsyncer

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

type fakeServices struct {
	synced   bool
	services []corev1.Service
	err      error
}

func (f *fakeServices) HasSynced() bool { return f.synced }
func (f *fakeServices) ListServices(context.Context) ([]corev1.Service, error) {
	return f.services, f.err
}

func TestServiceEnvGate(t *testing.T) {
	master := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	apiPod := func(links *bool) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "p"},
			Spec: corev1.PodSpec{EnableServiceLinks: links}}
	}
	staticPod := apiPod(ptr.To(true))
	staticPod.Annotations = map[string]string{podrules.ConfigSourceAnnotation: podrules.ConfigSourceFile}
	tests := []struct {
		name     string
		services ServiceLister // nil: standalone
		pod      *corev1.Pod
		wantHost string
		wantErr  string
	}{
		{"synced", &fakeServices{synced: true, services: []corev1.Service{master}}, apiPod(ptr.To(true)), "10.96.0.1", ""},
		{"links off still get the master service", &fakeServices{synced: true, services: []corev1.Service{master}}, apiPod(ptr.To(false)), "10.96.0.1", ""},
		{"not synced: an API pod waits", &fakeServices{}, apiPod(ptr.To(true)), "", "services have not yet been read at least once"},
		{"not synced: a static pod starts without", &fakeServices{}, staticPod, "", ""},
		{"standalone: no services", nil, apiPod(ptr.To(true)), "", ""},
		{"nil enableServiceLinks", &fakeServices{synced: true}, apiPod(nil), "", "nil pod.spec.enableServiceLinks"},
		{"list error", &fakeServices{synced: true, err: errors.New("boom")}, apiPod(ptr.To(true)), "", "failed to list services when setting up env vars: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestSyncer(t, Deps{Services: tt.services}, Options{})
			env, err := r.config.serviceEnv(context.Background(), tt.pod)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := env["KUBERNETES_SERVICE_HOST"]; got != tt.wantHost {
				t.Errorf("KUBERNETES_SERVICE_HOST = %q, want %q (env %v)", got, tt.wantHost, env)
			}
		})
	}
}

func TestReportMissingClusterDNS(t *testing.T) {
	pod := func(policy corev1.DNSPolicy, hostNet bool) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", UID: "u1"},
			Spec: corev1.PodSpec{DNSPolicy: policy, HostNetwork: hostNet}}
	}
	const msg = `kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`
	tests := []struct {
		name       string
		pod        *corev1.Pod
		clusterDNS []string
		want       []string
	}{
		{"ClusterFirst without clusterDNS", pod(corev1.DNSClusterFirst, false), nil, []string{
			"Warning MissingClusterDNS " + msg,
			`Warning MissingClusterDNS pod: "web_app(u1)". ` + msg}},
		{"ClusterFirstWithHostNet without clusterDNS", pod(corev1.DNSClusterFirstWithHostNet, true), nil, []string{
			"Warning MissingClusterDNS " + msg,
			`Warning MissingClusterDNS pod: "web_app(u1)". ` + msg}},
		{"ClusterFirst with clusterDNS", pod(corev1.DNSClusterFirst, false), []string{"10.96.0.10"}, nil},
		{"ClusterFirst on the host network is Default", pod(corev1.DNSClusterFirst, true), nil, nil},
		{"Default", pod(corev1.DNSDefault, false), nil, nil},
		{"None", pod(corev1.DNSNone, false), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			r := newTestSyncer(t, Deps{Recorder: rec}, Options{NodeName: "n1", Sandbox: podconfig.SandboxOptions{ClusterDNS: tt.clusterDNS}})
			r.config.reportMissingClusterDNS(tt.pod)
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events = %q, want %q", got, tt.want)
			}
		})
	}
}
