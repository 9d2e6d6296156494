package dra

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// claimsInUseAnyDriver is the driver_name of dra_resource_claims_in_use that counts every prepared claim.
const claimsInUseAnyDriver = "<any>"

// durationBuckets are the kubelet's DRADurationBuckets: 15 exponential buckets from 0.1 s to 40 s.
var durationBuckets = prometheus.ExponentialBucketsRange(.1, 40, 15)

// metrics are the kubelet's DRA metric families.
type metrics struct {
	operations *prometheus.HistogramVec
	grpc       *prometheus.HistogramVec
}

func newMetrics() *metrics {
	return &metrics{
		operations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "dra", Name: "operations_duration_seconds", Buckets: durationBuckets,
			Help: "Latency histogram in seconds for the duration of handling all ResourceClaims referenced by a pod when the pod starts or stops. " +
				"Identified by the name of the operation (PrepareResources or UnprepareResources) and separated by the success of the operation. " +
				"The number of failed operations is provided through the histogram's overall count.",
		}, []string{"operation_name", "is_error"}),
		grpc: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "dra", Name: "grpc_operations_duration_seconds", Buckets: durationBuckets,
			Help: "Duration in seconds of the DRA gRPC operations",
		}, []string{"driver_name", "method_name", "grpc_status_code"}),
	}
}

// observe records one PrepareResources or UnprepareResources call begun at start.
func (m *Manager) observe(operation string, start time.Time, err error) {
	m.metrics.operations.WithLabelValues(operation, strconv.FormatBool(err != nil)).Observe(m.clock.Since(start).Seconds())
}

// interceptor times each gRPC call to a driver's plugin.
func (ms *metrics) interceptor(driver string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		ms.grpc.WithLabelValues(driver, method, status.Code(err).String()).Observe(time.Since(start).Seconds())
		return err
	}
}

// RegisterMetrics registers the DRA manager's metrics: dra_operations_duration_seconds,
// dra_grpc_operations_duration_seconds and dra_resource_claims_in_use.
func (m *Manager) RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.metrics.operations, m.metrics.grpc, claimsInUse{m}} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// claimsInUse is dra_resource_claims_in_use, computed when scraped: the prepared claims by driver, and
// all of them under <any>.
type claimsInUse struct{ m *Manager }

var claimsInUseDesc = prometheus.NewDesc("dra_resource_claims_in_use",
	"The number of ResourceClaims that are currently in use on the node, by driver name (driver_name label value) and across all drivers "+
		"(special value <any> for driver_name). Note that the sum of all by-driver counts is not the total number of in-use ResourceClaims "+
		"because the same ResourceClaim might use devices from different drivers. Instead, use the count for the <any> driver_name.",
	[]string{"driver_name"}, nil)

func (c claimsInUse) Describe(ch chan<- *prometheus.Desc) { ch <- claimsInUseDesc }

func (c claimsInUse) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]int{claimsInUseAnyDriver: 0}
	c.m.mu.Lock()
	for _, info := range c.m.claims {
		if !info.prepared {
			continue
		}
		counts[claimsInUseAnyDriver]++
		for driver := range info.DriverState {
			counts[driver]++
		}
	}
	c.m.mu.Unlock()
	for driver, n := range counts {
		ch <- prometheus.MustNewConstMetric(claimsInUseDesc, prometheus.GaugeValue, float64(n), driver)
	}
}
