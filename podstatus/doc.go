// Package podstatus computes a pod's status the way the kubelet does.
//
// It owns the pure translation from what nodelet knows about a pod (the desired pod with its current API
// status, the runtime's view of its sandboxes and container attempts, waiting reasons, probe results and
// pod-level outcomes such as admission rejection, activeDeadlineSeconds and eviction) into the
// corev1.PodStatus the kubelet would write: phase, conditions, container statuses, IPs, start time, QoS
// class and resources, including what the kubelet's status manager preserves from the old status and
// withholds until a pod has really stopped.
//
// It must not call the API server or the CRI, read files or logs, start goroutines or keep state between
// calls: everything comes in through Input and the result is a value. The semantics follow the kubelet of
// k8s.io/kubernetes v1.37.1 (kubelet_pods.go, status/generate.go, status/status_manager.go) with its
// default feature gates, without importing k8s.io/kubernetes.
package podstatus
