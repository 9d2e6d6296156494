package podrules

import (
	"slices"
	"testing"
)

func TestSortPodIPs(t *testing.T) {
	tests := []struct {
		name            string
		podIPs, nodeIPs []string
		want            []string
	}{
		{name: "IPv4 node, IPv6 first from the runtime", podIPs: []string{"fd00::5", "10.244.0.5"}, nodeIPs: []string{"192.168.1.2"}, want: []string{"10.244.0.5", "fd00::5"}},
		{name: "IPv6 node", podIPs: []string{"10.244.0.5", "fd00::5"}, nodeIPs: []string{"fd00::1", "192.168.1.2"}, want: []string{"fd00::5", "10.244.0.5"}},
		{name: "no node IPs: IPv4 first", podIPs: []string{"fd00::5", "10.244.0.5"}, want: []string{"10.244.0.5", "fd00::5"}},
		{name: "one per family", podIPs: []string{"10.244.0.5", "10.244.0.6", "fd00::5", "fd00::6"}, nodeIPs: []string{"192.168.1.2"}, want: []string{"10.244.0.5", "fd00::5"}},
		{name: "canonical form", podIPs: []string{"010.244.000.005", "FD00:0::5"}, nodeIPs: []string{"192.168.1.2"}, want: []string{"10.244.0.5", "fd00::5"}},
		{name: "garbage left out", podIPs: []string{"not-an-ip", "10.244.0.5"}, want: []string{"10.244.0.5"}},
		{name: "none", want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SortPodIPs(tt.podIPs, tt.nodeIPs); !slices.Equal(got, tt.want) {
				t.Errorf("SortPodIPs() = %v, want %v", got, tt.want)
			}
		})
	}
}
