// Package nodeshutdown is graceful node shutdown, as the kubelet does it on Linux: with shutdownGracePeriod
// (and shutdownGracePeriodCriticalPods) or shutdownGracePeriodByPodPriority set, the agent holds a systemd
// logind "delay" inhibitor lock on shutdown (raising logind's InhibitDelayMaxSec through
// /etc/systemd/logind.conf.d/99-kubelet.conf when it is below the periods' sum) and watches logind's
// PrepareForShutdown signal on the system D-Bus.
//
// When a shutdown begins the node turns NotReady ("node is shutting down"), new pods are rejected
// (NodeShutdown), and the running pods are stopped by priority group, lowest first, each group within its
// period: a pod gets the shorter of its group's period and its own terminationGracePeriodSeconds, and ends
// Failed with reason Terminated and a DisruptionTarget condition (TerminationByKubelet). Then the lock is
// released and the machine may go down. A cancelled shutdown (PrepareForShutdown false) takes the lock again
// and the node back to Ready. The start and end of the last shutdown are kept in
// <root>/graceful_node_shutdown_state and exported as metrics.
package nodeshutdown
