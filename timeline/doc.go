// Package timeline keeps each pod's start on the node as a timeline: when it was admitted, when its volumes
// were ready, when its sandbox ran, when each container's image was there, when each container was created
// and started, and when the pod was first Ready. The node API serves a pod's timeline as JSON, the time
// from admission to each phase is a histogram (nodelet_pod_start_phase_seconds), and with a tracer each
// start is also an OpenTelemetry span.
package timeline
