package podconfig

import (
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// masterService is the API server's Service in the default namespace, whose variables every pod gets.
const masterService = "kubernetes"

// ServiceEnv builds the service link variables of a pod in namespace, like the kubelet's
// getServiceEnvVarMap and envvars.FromServices: FOO_SERVICE_HOST, FOO_SERVICE_PORT, FOO_SERVICE_PORT_<NAME>
// and the Docker link variables (FOO_PORT, FOO_PORT_80_TCP, ..._PROTO, ..._PORT, ..._ADDR) of
//   - the "kubernetes" Service of the default namespace, always (even with enableServiceLinks false);
//   - with enableServiceLinks, every Service of the pod's namespace — a Service there named "kubernetes"
//     takes the place of the default namespace's.
//
// Services without a cluster IP (headless, ExternalName) give no variables. The result goes to
// EnvOptions.ServiceEnv: the container's own variables override it.
func ServiceEnv(services []corev1.Service, namespace string, enableServiceLinks bool) map[string]string {
	env := map[string]string{}
	for _, svc := range linkedServices(services, namespace, enableServiceLinks) {
		addServiceVars(env, svc)
	}
	return env
}

// linkedServices picks, by name, the services whose variables the pod gets, sorted by name.
func linkedServices(services []corev1.Service, namespace string, enableServiceLinks bool) []*corev1.Service {
	byName := map[string]*corev1.Service{}
	for i := range services {
		svc := &services[i]
		if !hasClusterIP(svc) {
			continue
		}
		switch {
		case svc.Namespace == namespace && enableServiceLinks:
			byName[svc.Name] = svc
		case svc.Namespace == metav1.NamespaceDefault && svc.Name == masterService:
			if _, taken := byName[svc.Name]; !taken {
				byName[svc.Name] = svc
			}
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]*corev1.Service, 0, len(names))
	for _, name := range names {
		out = append(out, byName[name])
	}
	return out
}

// hasClusterIP is the kubelet's IsServiceIPSet: a cluster IP that is neither "" nor "None".
func hasClusterIP(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

// addServiceVars adds one service's variables.
func addServiceVars(env map[string]string, svc *corev1.Service) {
	if len(svc.Spec.Ports) == 0 {
		return // a service with a cluster IP has ports; nothing to say without one
	}
	prefix := serviceVarName(svc.Name)
	ip := svc.Spec.ClusterIP
	env[prefix+"_SERVICE_HOST"] = ip
	env[prefix+"_SERVICE_PORT"] = strconv.Itoa(int(svc.Spec.Ports[0].Port))
	for _, p := range svc.Spec.Ports {
		if p.Name != "" {
			env[prefix+"_SERVICE_PORT_"+serviceVarName(p.Name)] = strconv.Itoa(int(p.Port))
		}
	}
	for i, p := range svc.Spec.Ports {
		addLinkVars(env, prefix, ip, p, i == 0)
	}
}

// addLinkVars adds the Docker link variables of one port; the first port also gives <PREFIX>_PORT.
func addLinkVars(env map[string]string, prefix, ip string, p corev1.ServicePort, first bool) {
	protocol := corev1.ProtocolTCP
	if p.Protocol != "" {
		protocol = p.Protocol
	}
	port := strconv.Itoa(int(p.Port))
	lower := strings.ToLower(string(protocol))
	url := lower + "://" + net.JoinHostPort(ip, port)
	if first {
		env[prefix+"_PORT"] = url
	}
	portPrefix := prefix + "_PORT_" + port + "_" + strings.ToUpper(string(protocol))
	env[portPrefix] = url
	env[portPrefix+"_PROTO"] = lower
	env[portPrefix+"_PORT"] = port
	env[portPrefix+"_ADDR"] = ip
}

// serviceVarName turns a service or port name into a variable name: upper case, '-' → '_'.
func serviceVarName(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}
