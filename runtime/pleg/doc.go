// Package pleg is nodelet's pod lifecycle event generator, the kubelet's PLEG: it relists the runtime's
// sandboxes and containers (and follows its container events where the runtime offers them), diffs each
// relist against the previous one and reports which pods changed, as events and as a controller-runtime
// source; it records the kubelet's PLEG metrics and answers the PLEG health check. It keeps the pod state
// cache (PodCache): each pod's last runtime state (runtime.PodStatus), current until a relist or an event
// shows the runtime disagrees.
//
// It reaches the runtime only through the CRI client's listing and event calls (runtime.Client satisfies
// them) and reads pods from the kubelet's CRI labels (runtime.LabelPodUID, ...). It must not import
// podlifecycle/ or controllers/, which consume it through their own interfaces, nor build CRI configs
// (runtime/podconfig).
package pleg
