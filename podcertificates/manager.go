package podcertificates

import (
	"context"
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	certificatesinformers "k8s.io/client-go/informers/certificates/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubernetes/pkg/kubelet/podcertificate"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/podrules"
)

// PodInformer delivers the node's pods (a controller-runtime cache's informer for Pods).
type PodInformer interface {
	AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
}

// Options configure a Manager.
type Options struct {
	// Client creates PodCertificateRequests, reads the pods' ServiceAccounts and watches the node's
	// requests and Node.
	Client kubernetes.Interface
	// NodeName is this node.
	NodeName string
	// Pods returns the node's pod informer; it is called once, when the Manager starts.
	Pods func(ctx context.Context) (PodInformer, error)
	// Recorder records the pods' certificate events.
	Recorder record.EventRecorder
	// Clock times refreshes (default: the real clock).
	Clock clock.WithTicker
}

// Manager is the node's pod certificate issuer; the volume manager reads the credentials it holds
// (GetPodCertificateCredentialBundle). Start runs it.
type Manager struct {
	opts    Options
	issuer  *podcertificate.IssuingManager
	factory *informerFactory
	nodes   *informerFactory

	mu      sync.Mutex
	pods    map[types.UID]*corev1.Pod // the pods with a podCertificate source
	runCtx  context.Context
	started bool
}

// New builds a Manager; nothing runs until Start.
func New(opts Options) (*Manager, error) {
	if opts.Client == nil || opts.NodeName == "" || opts.Pods == nil || opts.Recorder == nil {
		return nil, errors.New("podcertificates: Client, NodeName, Pods and Recorder are required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	m := &Manager{opts: opts, pods: map[types.UID]*corev1.Pod{}}
	// The kubelet's two watches: its PodCertificateRequests and its Node, each narrowed by a field
	// selector the Node authorizer accepts.
	requests := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", opts.NodeName).String()
	}
	node := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, opts.NodeName).String()
	}
	m.factory, m.nodes = newInformerFactory(opts.Client), newInformerFactory(opts.Client)
	m.issuer = podcertificate.NewIssuingManager(opts.Client, podIndex{m}, opts.Recorder,
		certificatesinformers.New(m.factory, metav1.NamespaceAll, requests).PodCertificateRequests(),
		coreinformers.New(m.nodes, metav1.NamespaceAll, node).Nodes(),
		types.NodeName(opts.NodeName), opts.Clock)
	return m, nil
}

// Start follows the node's pods until ctx ends; the issuer and its watches start with the first pod that
// has a podCertificate source.
func (m *Manager) Start(ctx context.Context) error {
	inf, err := m.opts.Pods(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.runCtx = ctx
	m.mu.Unlock()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.podChanged(obj) },
		UpdateFunc: func(_, obj any) { m.podChanged(obj) },
		DeleteFunc: m.podDeleted,
	}); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// podChanged keeps a pod of this node with a podCertificate source and has its sources looked at (a new
// pod gets its first requests at once).
func (m *Manager) podChanged(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName != m.opts.NodeName || podrules.IsMirrorPod(pod) || !hasPodCertificate(pod) {
		return
	}
	m.mu.Lock()
	m.pods[pod.UID] = pod
	ctx := m.startLocked()
	m.mu.Unlock()
	m.issuer.TrackPod(ctx, pod)
}

// podDeleted forgets a deleted pod's credentials.
func (m *Manager) podDeleted(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	m.mu.Lock()
	_, known := m.pods[pod.UID]
	delete(m.pods, pod.UID)
	ctx := m.runCtx
	m.mu.Unlock()
	if known {
		m.issuer.ForgetPod(ctx, pod)
	}
}

// startLocked starts the watches and the issuer once, and returns the context they run under.
func (m *Manager) startLocked() context.Context {
	ctx := m.runCtx
	if !m.started {
		m.started = true
		m.factory.Start(ctx.Done())
		m.nodes.Start(ctx.Done())
		go m.issuer.Run(ctx)
	}
	return ctx
}

// GetPodCertificateCredentialBundle returns the private key and certificate chain of a pod's
// podCertificate source, or why there are none yet (not issued, denied, failed).
func (m *Manager) GetPodCertificateCredentialBundle(ctx context.Context, namespace, podName, podUID, volumeName string, sourceIndex int) ([]byte, []byte, error) {
	return m.issuer.GetPodCertificateCredentialBundle(ctx, namespace, podName, podUID, volumeName, sourceIndex)
}

func hasPodCertificate(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.PodCertificate != nil {
				return true
			}
		}
	}
	return false
}

// podIndex is the issuer's view of the pods (its PodManager): the pods with a podCertificate source.
type podIndex struct{ m *Manager }

func (p podIndex) GetPodByUID(uid types.UID) (*corev1.Pod, bool) {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	pod, ok := p.m.pods[uid]
	return pod, ok
}

func (p podIndex) GetPods() []*corev1.Pod {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(p.m.pods))
	for _, pod := range p.m.pods {
		out = append(out, pod)
	}
	return out
}

var statesDesc = prometheus.NewDesc("kubelet_podcertificate_states",
	"Gauge vector reporting the number of pod certificate projected volume sources, faceted by signer_name and state.",
	[]string{"signer_name", "state"}, nil)

// Collector is kubelet_podcertificate_states: the node's podCertificate sources by signer and state
// (not_yet_issued, fresh, overdue_for_refresh, expired, denied, failed).
func (m *Manager) Collector() prometheus.Collector { return collector{m} }

type collector struct{ m *Manager }

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- statesDesc }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for k, n := range c.m.issuer.MetricReport().PodCertificateStates {
		ch <- prometheus.MustNewConstMetric(statesDesc, prometheus.GaugeValue, float64(n), k.SignerName, k.State)
	}
}
