package agent

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"k8s.io/component-base/tracing"

	"github.com/nodelet/nodelet/config"
)

// tracerProvider is the kubelet's OpenTelemetry tracer provider from the configuration's tracing section
// (OTLP over gRPC to its endpoint, sampled per million), its service name the kubelet's and its host the
// node's hostname; nil when tracing is not configured.
func tracerProvider(cfg *config.Config) (tracing.TracerProvider, error) {
	if cfg.Kubelet.Tracing == nil {
		return nil, nil
	}
	tp, err := tracing.NewProvider(context.Background(), cfg.Kubelet.Tracing, nil, []resource.Option{
		resource.WithAttributes(semconv.ServiceNameKey.String("kubelet"), semconv.HostNameKey.String(cfg.Hostname)),
	})
	if err != nil {
		return nil, fmt.Errorf("could not configure tracer provider: %w", err)
	}
	return tp, nil
}

// setUpTracing picks the agent's tracer provider: the embedder's, else the configuration's (nil: none).
func (a *Agent) setUpTracing() error {
	if a.opts.TracerProvider != nil {
		a.tracer = a.opts.TracerProvider
		return nil
	}
	tp, err := tracerProvider(a.cfg)
	if err != nil || tp == nil {
		return err
	}
	a.tracerProvider, a.tracer = tp, tp
	return nil
}
