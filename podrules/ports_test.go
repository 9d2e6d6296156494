package podrules

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestResolvePort(t *testing.T) {
	c := &corev1.Container{Name: "app", Ports: []corev1.ContainerPort{
		{Name: "http", ContainerPort: 8080},
		{Name: "metrics", ContainerPort: 9090},
		{Name: "9000", ContainerPort: 9443},
		{Name: "zero", ContainerPort: 0},
	}}
	tests := []struct {
		name      string
		port      intstr.IntOrString
		container *corev1.Container
		want      int
		wantErr   string
	}{
		{name: "number", port: intstr.FromInt32(80), container: c, want: 80},
		{name: "lowest port", port: intstr.FromInt32(1), container: c, want: 1},
		{name: "highest port", port: intstr.FromInt32(65535), container: c, want: 65535},
		{name: "number not among the container's ports", port: intstr.FromInt32(81), container: c, want: 81},
		{name: "number without container", port: intstr.FromInt32(81), want: 81},
		{name: "zero", port: intstr.FromInt32(0), container: c, wantErr: "invalid port number: 0"},
		{name: "negative", port: intstr.FromInt32(-1), container: c, wantErr: "invalid port number: -1"},
		{name: "above 65535", port: intstr.FromInt32(65536), container: c, wantErr: "invalid port number: 65536"},
		{name: "named", port: intstr.FromString("http"), container: c, want: 8080},
		{name: "second named", port: intstr.FromString("metrics"), container: c, want: 9090},
		{name: "name that looks like a number is a name", port: intstr.FromString("9000"), container: c, want: 9443},
		{name: "numeric string is not parsed", port: intstr.FromString("8080"), container: c, wantErr: `port "8080" not found`},
		{name: "unknown name", port: intstr.FromString("nope"), container: c, wantErr: `port "nope" not found`},
		{name: "name without container", port: intstr.FromString("http"), wantErr: `port "http" not found`},
		{name: "named port out of range", port: intstr.FromString("zero"), container: c, wantErr: "invalid port number: 0"},
		{name: "no kind", port: intstr.IntOrString{Type: 7}, container: c, wantErr: "intOrString had no kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolvePort(tt.port, tt.container)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ResolvePort() = %d, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ResolvePort() = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}
