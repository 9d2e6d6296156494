package agent

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/dra"
	"github.com/nodelet/nodelet/internal/kubeclient"
	"github.com/nodelet/nodelet/podcertificates"
	"github.com/nodelet/nodelet/podlifecycle"
	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime/pleg"
	"github.com/nodelet/nodelet/staticpods"
	"github.com/nodelet/nodelet/volumes"
	"github.com/nodelet/nodelet/volumes/csi"
)

// apiAccess is how the node reaches the API server: through its manager (remoteAPI), or not at all
// (standalone: --kubeconfig not given, static pods only). The wiring asks it what the API server adds
// instead of testing for it.
type apiAccess interface {
	// standalone reports that there is no API server.
	standalone() bool
	// clientset is a client of the API server for what the manager's client does not do (nil: none).
	clientset(restCfg *rest.Config) (kubernetes.Interface, error)
	// recordTo sends the node's events to the API server.
	recordTo(b record.EventBroadcaster, restCfg *rest.Config) error
	// podSources are where the pods to run come from besides the static pod store.
	podSources(a *Agent, pods *podlifecycle.Reconciler) []source.Source
	// podDeps gives the pod workers the API server: the pod cache and status writes, the objects pods
	// reference, the Node, the cluster's Services.
	podDeps(ctx context.Context, a *Agent, deps *podlifecycle.Deps) error
	// volumeObjects gives the volume manager the API objects volumes are made from.
	volumeObjects(a *Agent, m *volumes.Manager)
	// podCertificates is the issuer of the pods' podCertificate projections (nil: none without an API
	// server).
	podCertificates(a *Agent, rec record.EventRecorder) (*podcertificates.Manager, error)
	// csiObjects gives the CSI node side the CSINode, Node and CSIDriver objects.
	csiObjects(a *Agent, opts *csi.Options)
	// claimObjects gives the DRA manager the ResourceClaims and this node's ResourceSlices.
	claimObjects(a *Agent, opts *dra.Options)
	// apiPods are the API's pods bound to this node (mirror pods left out), for the node API's /pods.
	apiPods(ctx context.Context, a *Agent) ([]corev1.Pod, error)
	// setup wires the controllers of API objects: the Node, its Lease and the mirror pods.
	setup(ctx context.Context, a *Agent, recorder record.EventRecorder, ips []net.IP, podEvents *pleg.PLEG, store *staticpods.Store) error
}

// apiFor is the node's access to the API server: none without a REST config or a kubeconfig.
func apiFor(restCfg *rest.Config, cfg *config.Config) apiAccess {
	if restCfg == nil && cfg.Kubeconfig == "" {
		return withoutAPI{}
	}
	return remoteAPI{}
}

// remoteAPI reaches the API server through the agent's manager.
type remoteAPI struct{}

func (remoteAPI) standalone() bool { return false }

func (remoteAPI) clientset(restCfg *rest.Config) (kubernetes.Interface, error) {
	return kubeclient.NewForConfig(restCfg)
}

func (r remoteAPI) recordTo(b record.EventBroadcaster, restCfg *rest.Config) error {
	cs, err := kubeclient.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	return nil
}

func (remoteAPI) podSources(a *Agent, pods *podlifecycle.Reconciler) []source.Source {
	return []source.Source{pods.APIPodSource(a.mgr.GetCache())}
}

// podDeps: the node-scoped cache and its client, objects read by name, the Node from the cache, and the
// Services shared with the process's other nodes or from an informer of the node's own.
func (remoteAPI) podDeps(ctx context.Context, a *Agent, deps *podlifecycle.Deps) error {
	deps.Client, deps.Secrets, deps.Node = a.mgr.GetClient(), podlifecycle.APIObjects{Reader: a.mgr.GetAPIReader()}, a.getNode
	pods, err := a.mgr.GetCache().GetInformer(ctx, &corev1.Pod{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	deps.PodsSynced = pods.HasSynced
	if a.opts.Services != nil {
		deps.Services = a.opts.Services
		return nil
	}
	s, err := podlifecycle.NewAPIServices(ctx, a.mgr.GetCache())
	if err != nil {
		return err
	}
	deps.Services = s
	return nil
}

// volumeObjects: Secrets and ConfigMaps read by name straight from the API (kept 10 s), CSIDrivers and
// ClusterTrustBundles from the watch-fed cache, claims, PersistentVolumes and VolumeAttachments fresh, service account tokens from the
// TokenRequest API — all that the Node authorizer allows a node.
func (remoteAPI) volumeObjects(a *Agent, m *volumes.Manager) {
	objs := &volumes.CachedObjects{Reader: a.mgr.GetAPIReader(), Tokens: a.mgr.GetClient(), Status: a.mgr.GetClient(),
		Drivers: a.mgr.GetClient(), TrustBundles: a.mgr.GetClient(), Clock: a.clock(), TTL: 10 * time.Second}
	m.Objects, m.CSIObjects, m.ClaimStatus = objs, objs, objs
}

// podCertificates: PodCertificateRequests created with the node's credentials, as the kubelet's, for the
// pods of the node's pod informer.
func (remoteAPI) podCertificates(a *Agent, rec record.EventRecorder) (*podcertificates.Manager, error) {
	cs, err := kubeclient.NewForConfig(a.mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	return podcertificates.New(podcertificates.Options{Client: cs, NodeName: a.cfg.NodeName, Recorder: rec, Clock: a.clock(),
		Pods: func(ctx context.Context) (podcertificates.PodInformer, error) {
			return a.mgr.GetCache().GetInformer(ctx, &corev1.Pod{}, cache.BlockUntilSynced(false))
		}})
}

func (remoteAPI) csiObjects(a *Agent, opts *csi.Options) {
	opts.Reader, opts.Writer, opts.CSIDrivers = a.mgr.GetAPIReader(), a.mgr.GetClient(), a.mgr.GetClient()
}

func (remoteAPI) claimObjects(a *Agent, opts *dra.Options) {
	opts.Reader, opts.Writer = a.mgr.GetAPIReader(), a.mgr.GetClient()
}

func (remoteAPI) apiPods(ctx context.Context, a *Agent) ([]corev1.Pod, error) {
	var l corev1.PodList
	if err := a.mgr.GetClient().List(ctx, &l); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if !podrules.IsMirrorPod(&p) && p.Spec.NodeName == a.cfg.NodeName {
			out = append(out, p)
		}
	}
	return out, nil
}

func (remoteAPI) setup(ctx context.Context, a *Agent, recorder record.EventRecorder, ips []net.IP, podEvents *pleg.PLEG,
	store *staticpods.Store) error {
	return a.setupAPI(ctx, recorder, ips, podEvents, store)
}

// withoutAPI is a standalone node's: nothing reaches an API server; the pods are the static pods, events
// are only logged, volumes get no API objects (noAPI answers every look-up with an error).
type withoutAPI struct{}

func (withoutAPI) standalone() bool                                            { return true }
func (withoutAPI) clientset(*rest.Config) (kubernetes.Interface, error)        { return nil, nil }
func (withoutAPI) recordTo(record.EventBroadcaster, *rest.Config) error        { return nil }
func (withoutAPI) podSources(*Agent, *podlifecycle.Reconciler) []source.Source { return nil }
func (withoutAPI) volumeObjects(*Agent, *volumes.Manager)                      {}
func (withoutAPI) csiObjects(*Agent, *csi.Options)                             {}
func (withoutAPI) podCertificates(*Agent, record.EventRecorder) (*podcertificates.Manager, error) {
	return nil, nil
}
func (withoutAPI) claimObjects(*Agent, *dra.Options)                     {}
func (withoutAPI) apiPods(context.Context, *Agent) ([]corev1.Pod, error) { return nil, nil }

// podDeps: no API server to read from; a Service lister shared with the process's nodes, if given.
func (withoutAPI) podDeps(_ context.Context, a *Agent, deps *podlifecycle.Deps) error {
	if a.opts.Services != nil {
		deps.Services = a.opts.Services
	}
	return nil
}

func (withoutAPI) setup(context.Context, *Agent, record.EventRecorder, []net.IP, *pleg.PLEG, *staticpods.Store) error {
	return nil
}
