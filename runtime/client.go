package runtime

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// maxMsgSize is the largest CRI message accepted, as in the kubelet (16 MiB: big ListContainers answers).
const maxMsgSize = 16 << 20

// DefaultTimeout bounds an RPC when no timeout is configured (the kubelet's runtimeRequestTimeout default).
const DefaultTimeout = 2 * time.Minute

// Client talks CRI to a container runtime. It is safe for concurrent use.
type Client struct {
	runtimeConn *grpc.ClientConn
	imageConn   *grpc.ClientConn
	runtime     runtimeapi.RuntimeServiceClient
	images      runtimeapi.ImageServiceClient
	timeout     time.Duration
}

// Options configure a Client.
type Options struct {
	// ImageEndpoint is the ImageService endpoint; empty means the runtime endpoint.
	ImageEndpoint string
	// Timeout bounds each RPC (pulls excepted, which are bounded by their context only).
	Timeout time.Duration
	// Metrics records runtime operations; nil records nothing.
	Metrics *Metrics
	// TracerProvider traces each CRI call as a span, the caller's span its parent (nil: not traced), as
	// the kubelet's CRI client does.
	TracerProvider trace.TracerProvider
}

// Dial creates a client for the runtime at endpoint ("unix:///path" or "/path"). It does not wait for the
// runtime: use WaitForRuntime to validate the connection.
func Dial(endpoint string, opts Options) (*Client, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	rc, err := dial(endpoint, opts.Metrics, opts.TracerProvider)
	if err != nil {
		return nil, err
	}
	c := &Client{runtimeConn: rc, imageConn: rc, timeout: opts.Timeout}
	if opts.ImageEndpoint != "" && opts.ImageEndpoint != endpoint {
		if c.imageConn, err = dial(opts.ImageEndpoint, opts.Metrics, opts.TracerProvider); err != nil {
			_ = rc.Close()
			return nil, err
		}
	}
	c.runtime = runtimeapi.NewRuntimeServiceClient(c.runtimeConn)
	c.images = runtimeapi.NewImageServiceClient(c.imageConn)
	return c, nil
}

func dial(endpoint string, m *Metrics, tp trace.TracerProvider) (*grpc.ClientConn, error) {
	target, err := normalizeEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
	}
	if m != nil {
		opts = append(opts, grpc.WithChainUnaryInterceptor(m.unaryInterceptor),
			grpc.WithChainStreamInterceptor(m.streamInterceptor))
	}
	if tp != nil {
		opts = append(opts, grpc.WithStatsHandler(otelgrpc.NewClientHandler(
			otelgrpc.WithMessageEvents(otelgrpc.ReceivedEvents, otelgrpc.SentEvents),
			otelgrpc.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
			otelgrpc.WithTracerProvider(tp))))
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to runtime endpoint %q: %w", endpoint, err)
	}
	return conn, nil
}

// normalizeEndpoint accepts "unix:///path" and a bare absolute path, as the kubelet does.
func normalizeEndpoint(endpoint string) (string, error) {
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		if strings.TrimPrefix(endpoint, "unix://") == "" {
			return "", fmt.Errorf("runtime endpoint %q: empty socket path", endpoint)
		}
		return endpoint, nil
	case strings.HasPrefix(endpoint, "/"):
		return "unix://" + endpoint, nil
	default:
		return "", fmt.Errorf("runtime endpoint %q: only unix sockets are supported (unix:///path)", endpoint)
	}
}

// Close closes the connections.
func (c *Client) Close() error {
	err := c.runtimeConn.Close()
	if c.imageConn != c.runtimeConn {
		if ierr := c.imageConn.Close(); err == nil {
			err = ierr
		}
	}
	return err
}

// withTimeout derives the context for one RPC: the configured timeout plus extra (for RPCs that wait
// inside the runtime, such as StopContainer and ExecSync).
func (c *Client) withTimeout(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout+extra)
}
