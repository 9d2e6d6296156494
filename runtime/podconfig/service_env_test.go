package podconfig

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func svc(ns, name, clusterIP string, ports ...corev1.ServicePort) corev1.Service {
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: clusterIP, Ports: ports}}
}

func port(name string, p int32, proto corev1.Protocol) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: p, Protocol: proto}
}

// kubernetesVars are the variables of the default namespace's "kubernetes" Service at 10.96.0.1:443.
func kubernetesVars() map[string]string {
	return map[string]string{
		"KUBERNETES_SERVICE_HOST":       "10.96.0.1",
		"KUBERNETES_SERVICE_PORT":       "443",
		"KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT":               "tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP":       "tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP_PROTO": "tcp",
		"KUBERNETES_PORT_443_TCP_PORT":  "443",
		"KUBERNETES_PORT_443_TCP_ADDR":  "10.96.0.1",
	}
}

func merged(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestServiceEnv(t *testing.T) {
	master := svc("default", "kubernetes", "10.96.0.1", port("https", 443, corev1.ProtocolTCP))
	redis := svc("app", "redis-primary", "10.0.0.11", port("", 6379, ""))
	redisVars := map[string]string{
		"REDIS_PRIMARY_SERVICE_HOST":        "10.0.0.11",
		"REDIS_PRIMARY_SERVICE_PORT":        "6379",
		"REDIS_PRIMARY_PORT":                "tcp://10.0.0.11:6379",
		"REDIS_PRIMARY_PORT_6379_TCP":       "tcp://10.0.0.11:6379",
		"REDIS_PRIMARY_PORT_6379_TCP_PROTO": "tcp",
		"REDIS_PRIMARY_PORT_6379_TCP_PORT":  "6379",
		"REDIS_PRIMARY_PORT_6379_TCP_ADDR":  "10.0.0.11",
	}
	tests := []struct {
		name     string
		services []corev1.Service
		ns       string
		links    bool
		want     map[string]string
	}{
		{"no services", nil, "app", true, map[string]string{}},
		{"master service and one of the namespace", []corev1.Service{master, redis}, "app", true, merged(kubernetesVars(), redisVars)},
		{"links disabled: the master service only", []corev1.Service{master, redis}, "app", false, kubernetesVars()},
		{"other namespaces are not linked", []corev1.Service{master, svc("other", "db", "10.0.0.12", port("", 5432, ""))}, "app", true, kubernetesVars()},
		{"only the default namespace's kubernetes service is a master service",
			[]corev1.Service{svc("default", "web", "10.0.0.20", port("", 80, ""))}, "app", true, map[string]string{}},
		{"pod in the default namespace", []corev1.Service{master, svc("default", "web", "10.0.0.20", port("", 80, ""))}, "default", false, kubernetesVars()},
		{"headless and ExternalName services give nothing",
			[]corev1.Service{master, svc("app", "headless", corev1.ClusterIPNone, port("", 80, "")), svc("app", "external", "")}, "app", true, kubernetesVars()},
		{"a kubernetes service of the pod's namespace replaces the master's",
			[]corev1.Service{svc("app", "kubernetes", "10.0.0.99", port("", 8443, "")), master}, "app", true, map[string]string{
				"KUBERNETES_SERVICE_HOST": "10.0.0.99", "KUBERNETES_SERVICE_PORT": "8443", "KUBERNETES_PORT": "tcp://10.0.0.99:8443",
				"KUBERNETES_PORT_8443_TCP": "tcp://10.0.0.99:8443", "KUBERNETES_PORT_8443_TCP_PROTO": "tcp",
				"KUBERNETES_PORT_8443_TCP_PORT": "8443", "KUBERNETES_PORT_8443_TCP_ADDR": "10.0.0.99"}},
		{"... whatever the listing order", []corev1.Service{master, svc("app", "kubernetes", "10.0.0.99", port("", 8443, ""))}, "app", true, map[string]string{
			"KUBERNETES_SERVICE_HOST": "10.0.0.99", "KUBERNETES_SERVICE_PORT": "8443", "KUBERNETES_PORT": "tcp://10.0.0.99:8443",
			"KUBERNETES_PORT_8443_TCP": "tcp://10.0.0.99:8443", "KUBERNETES_PORT_8443_TCP_PROTO": "tcp",
			"KUBERNETES_PORT_8443_TCP_PORT": "8443", "KUBERNETES_PORT_8443_TCP_ADDR": "10.0.0.99"}},
		{"named ports, protocols, first port special", []corev1.Service{svc("app", "dns", "10.0.0.10",
			port("dns-udp", 53, corev1.ProtocolUDP), port("dns-tcp", 53, corev1.ProtocolTCP), port("metrics", 9153, corev1.ProtocolSCTP))},
			"app", true, map[string]string{
				"DNS_SERVICE_HOST": "10.0.0.10", "DNS_SERVICE_PORT": "53",
				"DNS_SERVICE_PORT_DNS_UDP": "53", "DNS_SERVICE_PORT_DNS_TCP": "53", "DNS_SERVICE_PORT_METRICS": "9153",
				"DNS_PORT":        "udp://10.0.0.10:53",
				"DNS_PORT_53_UDP": "udp://10.0.0.10:53", "DNS_PORT_53_UDP_PROTO": "udp", "DNS_PORT_53_UDP_PORT": "53", "DNS_PORT_53_UDP_ADDR": "10.0.0.10",
				"DNS_PORT_53_TCP": "tcp://10.0.0.10:53", "DNS_PORT_53_TCP_PROTO": "tcp", "DNS_PORT_53_TCP_PORT": "53", "DNS_PORT_53_TCP_ADDR": "10.0.0.10",
				"DNS_PORT_9153_SCTP": "sctp://10.0.0.10:9153", "DNS_PORT_9153_SCTP_PROTO": "sctp", "DNS_PORT_9153_SCTP_PORT": "9153", "DNS_PORT_9153_SCTP_ADDR": "10.0.0.10",
			}},
		{"IPv6 cluster IP", []corev1.Service{svc("app", "v6", "fd00::10", port("", 80, ""))}, "app", true, map[string]string{
			"V6_SERVICE_HOST": "fd00::10", "V6_SERVICE_PORT": "80", "V6_PORT": "tcp://[fd00::10]:80",
			"V6_PORT_80_TCP": "tcp://[fd00::10]:80", "V6_PORT_80_TCP_PROTO": "tcp", "V6_PORT_80_TCP_PORT": "80", "V6_PORT_80_TCP_ADDR": "fd00::10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ServiceEnv(tt.services, tt.ns, tt.links); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestServiceEnvInContainerEnvironment: the container's own variables (env and envFrom) win over service
// variables, and $(VAR) in env values can name a service variable.
func TestServiceEnvInContainerEnvironment(t *testing.T) {
	master := svc("default", "kubernetes", "10.96.0.1", port("https", 443, corev1.ProtocolTCP))
	pod := testPod()
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{
		{Name: "API", Value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
		{Name: "KUBERNETES_SERVICE_PORT", Value: "6443"},
	}
	opts := envOpts()
	opts.ServiceEnv = ServiceEnv([]corev1.Service{master}, pod.Namespace, true)
	got, _, err := envString(t, pod, c, opts, envSource())
	if err != nil {
		t.Fatal(err)
	}
	want := "API=https://10.96.0.1:443\nKUBERNETES_SERVICE_PORT=6443\n" +
		"KUBERNETES_PORT=tcp://10.96.0.1:443\nKUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443\n" +
		"KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1\nKUBERNETES_PORT_443_TCP_PORT=443\nKUBERNETES_PORT_443_TCP_PROTO=tcp\n" +
		"KUBERNETES_SERVICE_HOST=10.96.0.1\nKUBERNETES_SERVICE_PORT_HTTPS=443"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
