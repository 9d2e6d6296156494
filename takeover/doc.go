// Package takeover runs nodelet from a DaemonSet pod on a node that the kubelet runs, in the kubelet's
// place: it enters the host's mount namespace (so that every path of the kubelet's flags and config file,
// and every mount nodelet makes for pods, is the host's), finds the running kubelet's command line
// through hostPID (or kubeadm's files when no kubelet runs), and returns the flags nodelet then starts with.
// The handover itself is the kubelet's lock file protocol (--lock-file with --exit-on-lock-contention),
// which nodelet implements: the kubelet exits when nodelet asks for its lock, and takes the node back
// (its supervisor restarts it and it waits for the lock) when nodelet exits.
package takeover
