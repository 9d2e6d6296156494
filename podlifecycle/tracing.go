package podlifecycle

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
)

// instrumentationScope names the pod syncs' tracer (the kubelet's scope, so traces read the same).
const instrumentationScope = "k8s.io/kubernetes/pkg/kubelet"

// startSpan starts a pod sync's span with the kubelet's attributes; the CRI calls made with its context
// are its children.
func (r *Reconciler) startSpan(ctx context.Context, name string, pod *corev1.Pod) (context.Context, trace.Span) {
	return r.tracer.Start(ctx, name, trace.WithAttributes(
		attribute.String("k8s.pod.uid", string(pod.UID)),
		attribute.String("k8s.pod", pod.Namespace+"/"+pod.Name),
		attribute.String("k8s.pod.name", pod.Name),
		attribute.String("k8s.namespace.name", pod.Namespace),
	))
}

// endSpan ends a sync's span, recording its error.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "sync failed")
	}
	span.End()
}
