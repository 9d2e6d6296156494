package podrules

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ResolvePort is the port number a probe (httpGet, tcpSocket) or an httpGet lifecycle hook connects to,
// by the kubelet's rule: a number is taken as it is; a string is the name of one of the container's
// ports (never parsed as a number: "8080" names a port like any other string). The result must be a
// valid port, 1 to 65535. A nil container has no ports.
func ResolvePort(portRef intstr.IntOrString, container *corev1.Container) (int, error) {
	var port int
	switch portRef.Type {
	case intstr.Int:
		port = portRef.IntValue()
	case intstr.String:
		n, ok := portByName(container, portRef.StrVal)
		if !ok {
			return 0, fmt.Errorf("port %q not found", portRef.StrVal)
		}
		port = n
	default:
		return 0, fmt.Errorf("intOrString had no kind: %+v", portRef)
	}
	if port < 1 || port > 65535 {
		return 0, fmt.Errorf("invalid port number: %d", port)
	}
	return port, nil
}

// portByName is the containerPort of the container's port of that name.
func portByName(container *corev1.Container, name string) (int, bool) {
	if container == nil {
		return 0, false
	}
	for _, p := range container.Ports {
		if p.Name == name {
			return int(p.ContainerPort), true
		}
	}
	return 0, false
}
