package podrules

import netutils "k8s.io/utils/net"

// SortPodIPs are a pod's IPs as its status gives them (the kubelet's sortPodIPs): the first IP of the node's
// primary family (nodeIPs[0]'s; IPv4 without node IPs), then the first of the other family, each written
// in its canonical form. status.podIP, the downward API's and a probe's address are the first of them.
func SortPodIPs(podIPs, nodeIPs []string) []string {
	primaryV4 := len(nodeIPs) == 0 || netutils.IsIPv4String(nodeIPs[0])
	ips := make([]string, 0, 2)
	for _, wantV4 := range [...]bool{primaryV4, !primaryV4} {
		for _, s := range podIPs {
			if ip := netutils.ParseIPSloppy(s); ip != nil && netutils.IsIPv4(ip) == wantV4 {
				ips = append(ips, ip.String())
				break
			}
		}
	}
	return ips
}
