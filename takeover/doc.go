// Package takeover runs nodelet from a DaemonSet pod on a node that the kubelet runs, in the kubelet's
// place: it enters the host's mount namespace (so that every path of the kubelet's flags and config file,
// and every mount nodelet makes for pods, is the host's), finds the running kubelet through hostPID — by
// what a pod cannot forge (its executable is the host's root-owned file, it is outside the pods' cgroups,
// in the host's root directory and mount namespace, and systemd's kubelet unit's main process where
// systemd runs), never by its name alone (Finder) — and returns the flags nodelet then starts with: the
// kubelet's command line, or kubeadm's files when no kubelet runs.
// The handover itself is the kubelet's lock file protocol (--lock-file with --exit-on-lock-contention),
// which nodelet implements: the kubelet exits when nodelet asks for its lock, and takes the node back
// (its supervisor restarts it and it waits for the lock) when nodelet exits.
package takeover
