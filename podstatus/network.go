package podstatus

import (
	corev1 "k8s.io/api/core/v1"
	netutils "k8s.io/utils/net"

	"github.com/nodelet/nodelet/podrules"
)

// podIPs are the newest ready sandbox's IPs: the first of the node's primary family, then the first of
// the other family. While no sandbox is ready (a stopped or recreated pod) the old IPs stay, as the
// kubelet's pod cache keeps them.
func (b *builder) podIPs() []corev1.PodIP {
	ips := b.rt.IPs
	if len(ips) == 0 && !b.anySandboxReady() {
		for _, ip := range b.old.PodIPs {
			ips = append(ips, ip.IP)
		}
	}
	var out []corev1.PodIP
	for _, ip := range podrules.SortPodIPs(ips, b.in.HostIPs) {
		out = append(out, corev1.PodIP{IP: ip})
	}
	return out
}

// setIPs sets the pod's IPs and the host's: host-network pods take the node's IPs.
func (b *builder) setIPs(s *corev1.PodStatus) {
	s.PodIPs = b.podIPs()
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}
	hostIPs := b.in.HostIPs
	if len(hostIPs) == 0 {
		return
	}
	if len(hostIPs) > 2 {
		hostIPs = hostIPs[:2]
	}
	s.HostIP = hostIPs[0]
	s.HostIPs = nil
	for _, ip := range hostIPs {
		s.HostIPs = append(s.HostIPs, corev1.HostIP{IP: ip})
	}
	if !b.pod.Spec.HostNetwork {
		return
	}
	if s.PodIP == "" {
		s.PodIP = hostIPs[0]
		s.PodIPs = []corev1.PodIP{{IP: s.PodIP}}
	}
	if len(hostIPs) == 2 && len(s.PodIPs) == 1 && netutils.IsIPv6String(s.PodIPs[0].IP) != netutils.IsIPv6String(hostIPs[1]) {
		s.PodIPs = append(s.PodIPs, corev1.PodIP{IP: hostIPs[1]})
	}
}
