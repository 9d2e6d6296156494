package podlifecycle

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nodelet/nodelet/allocation"
	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podstatus"
	"github.com/nodelet/nodelet/podsyncer"
	"github.com/nodelet/nodelet/statusmanager"
	"github.com/nodelet/nodelet/timeline"
)

// Reconciler runs the pods bound to this node: the kubelet's pod workers, SyncPod, SyncTerminatingPod
// and SyncTerminatedPod on controller-runtime. The workqueue key is the pod's namespace/name, so one key
// is never processed twice at once. Work that may take long — image pulls, stopping containers within
// their grace period, lifecycle hooks — runs in the background and enqueues the pod when it ends, so a
// 30 s grace period or a slow pull never holds up another pod.
type Reconciler struct {
	// Built by New from Deps and Options; optional dependencies not given are no-ops, never nil.
	client      client.Client // nil in standalone mode
	podsSynced  func() bool   // whether client's pod cache has synced; nil: not known
	syncer      *podsyncer.Syncer
	pleg        RelistedPods
	states      podsyncer.PodStates // the pods' runtime state the PLEG keeps current
	statuses    *statusmanager.Manager
	timeline    *timeline.Recorder
	tracer      trace.Tracer
	recorder    EventRecorder
	clock       clock.WithTicker
	node        func(ctx context.Context) (*corev1.Node, error) // fails in standalone mode
	volumes     Volumes
	static      StaticPods
	staticKinds []string
	podCgroups  PodCgroups
	nodeName    string
	rootDir     string
	maxWorkers  int
	// housekeepingPeriod is how often orphans are looked for.
	housekeepingPeriod time.Duration
	sysctls            *SysctlAllowlist
	// admitters run before the reconciler's own admission (the eviction manager's).
	admitters []PodAdmitter
	// devices gives admitted pods their devices; admitMu makes admissions one at a time, as the kubelet's
	// (each one counts the pods admitted before it).
	devices Devices
	userns  interface {
		RemoveOrphans(active func(types.UID) bool) error
	}
	// dra releases the claims of pods the node no longer has; a pod's API object stays while it holds any.
	dra     claimsHolder
	admitMu sync.Mutex
	// alloc keeps the pods' allocated and actuated resources and their resize conditions; resizes decides
	// the resizes pods ask for.
	alloc   *allocation.Manager
	resizes *resizer

	// seen is when each API pod not yet synced arrived.
	seen firstSeen

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	byKey   map[types.NamespacedName]map[types.UID]bool
	wake    chan event.GenericEvent
	metrics *podMetrics
}

// Run runs the pod controller until ctx ends, with the PLEG, completions of background work, the static
// pod store and the given sources (APIPodSource for the API's pods). It is deliberately not a manager
// Runnable: a manager starts its runnables only once its caches have synced, and static pods must run
// before — and without — an API server.
func (r *Reconciler) Run(ctx context.Context, sources ...source.Source) error {
	c, err := controller.NewTypedUnmanaged[reconcile.Request]("pod", controller.TypedOptions[reconcile.Request]{
		Reconciler:              r,
		MaxConcurrentReconciles: r.maxWorkers,
		RateLimiter:             retryLimiter(),
		Logger:                  ctrl.LoggerFrom(ctx),
		SkipNameValidation:      ptr.To(true),
	})
	if err != nil {
		return err
	}
	all := append([]source.Source{source.Channel(r.wake, &handler.EnqueueRequestForObject{}), r.pleg.Source(), r.static.Source()}, sources...)
	for _, src := range all {
		if err := c.Watch(src); err != nil {
			return err
		}
	}
	go func() { _ = (&housekeeping{r: r}).Start(ctx) }()
	return c.Start(ctx)
}

// retryBackOffMax bounds the back-off of a pod whose sync failed (a status write to an API server that is
// away): the kubelet retries a failed sync after its backOffPeriod, 10 s, however often it failed, while
// controller-runtime's default doubles up to 1000 s — after an API server outage of a minute, pods waited
// as long again before their status was written.
const retryBackOffMax = 10 * time.Second

// retryLimiter is controller-runtime's default rate limiter with the per-pod back-off capped at
// retryBackOffMax.
func retryLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, retryBackOffMax),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// APIPodSource enqueues the pods of the manager's (node-scoped) cache, ignoring status-only updates, and
// notes when each pod arrived. It registers with the informer without waiting for it to sync, so the
// controller starts at once even while the API server is unreachable.
func (r *Reconciler) APIPodSource(c cache.Cache) source.Source {
	pred := podSpecChanged()
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		inf, err := c.GetInformer(ctx, &corev1.Pod{}, cache.BlockUntilSynced(false))
		if err != nil {
			return err
		}
		add := func(obj any) {
			if pod, ok := obj.(*corev1.Pod); ok {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}})
			}
		}
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if pod, ok := obj.(*corev1.Pod); ok {
					r.seen.note(pod, r.clock.Now())
				}
				add(obj)
			},
			UpdateFunc: func(o, n any) {
				op, ok1 := o.(*corev1.Pod)
				np, ok2 := n.(*corev1.Pod)
				if ok1 && ok2 && pred.Update(event.UpdateEvent{ObjectOld: op, ObjectNew: np}) {
					add(n)
				}
			},
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				if pod, ok := obj.(*corev1.Pod); ok {
					r.seen.forget(pod.UID)
				}
				add(obj)
			},
		})
		return err
	})
}

// podSpecChanged passes creations, deletions and updates that change what should run (spec generation,
// deletion timestamp or grace period, labels, annotations), not status-only updates — except one that
// leaves the pod's Ready condition out of step with its readiness gates (a gate's condition set through
// pods/status), on which the kubelet syncs the pod too. The agent's own status writes pass neither test.
func podSpecChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return o.GetGeneration() != n.GetGeneration() ||
				!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) ||
				!equalInt64Ptr(o.GetDeletionGracePeriodSeconds(), n.GetDeletionGracePeriodSeconds()) ||
				!equalMaps(o.GetLabels(), n.GetLabels()) || !equalMaps(o.GetAnnotations(), n.GetAnnotations()) ||
				terminalPhase(o) != terminalPhase(n) || readinessOutOfStep(n)
		},
	}
}

// readinessOutOfStep: the pod's Ready condition no longer matches its readiness gates' conditions.
func readinessOutOfStep(o any) bool {
	p, ok := o.(*corev1.Pod)
	return ok && podstatus.NeedsReadinessSync(p)
}

func terminalPhase(o any) bool {
	p, ok := o.(*corev1.Pod)
	return ok && podrules.IsTerminalPhase(p.Status.Phase)
}

func equalInt64Ptr(a, b *int64) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func (r *Reconciler) enqueue(key types.NamespacedName) {
	stub := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	select {
	case r.wake <- event.GenericEvent{Object: stub}:
	default:
		// The queue of wake-ups is full: the resync and the PLEG will bring the pod back.
	}
}

// Reconcile converges everything the node runs under one pod name: old UIDs under that name are torn
// down first, then the desired pod is synced, terminated or finished.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	start, op := r.clock.Now(), opSync
	defer func() { r.metrics.workerDuration.WithLabelValues(op).Observe(r.clock.Since(start).Seconds()) }()
	// Whether every static pod source was read is taken before the store is: a source that finishes its
	// first read during the lookup must not make a pod it just added look orphaned.
	seen := r.staticSeen()
	desired, err := r.desiredPod(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if desired == nil && !seen {
		// Until every static pod source was read once, a pod missing from the store may just not have
		// been read yet: never stop anything on that ground (an agent restart must not kill static pods).
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("pod", req.NamespacedName))
	res := result{}
	blocked := false
	for _, w := range r.workersFor(req.NamespacedName, desired) {
		if desired != nil && w.UID == desired.UID {
			continue
		}
		done, wr := r.terminateOrphan(ctx, w)
		res.Merge(wr)
		blocked = blocked || !done
		op = opKill
	}
	if desired == nil {
		return ctrlResult(res), nil
	}
	// A static pod waits for the previous one of its name to terminate (they would share its host ports and
	// files); an API pod starts at once beside it, as with the kubelet — a shared ResourceClaim still
	// prepared for the old UID then fails the new pod's preparation with the kubelet's event until released.
	if blocked && podrules.IsStaticPod(desired) {
		ctrl.LoggerFrom(ctx).V(1).Info("Waiting for the previous pod with this name to terminate", "podUID", desired.UID)
		return ctrlResult(res), nil
	}
	if w := r.stoppedOrphan(desired.UID); w != nil {
		// Desired again under the UID whose stop began when it was not: as the kubelet restarts a pod whose
		// worker had finished, the stop completes and the pod starts again from a fresh worker.
		done, wr := r.terminateOrphan(ctx, w)
		res.Merge(wr)
		if !done {
			return ctrlResult(res), nil
		}
		r.metrics.restartedPods.WithLabelValues(staticLabel(desired)).Inc()
		ctrl.LoggerFrom(ctx).Info("Pod will be restarted because it is desired again after its stop", "podUID", desired.UID)
	}
	w := r.workerFor(desired)
	wr, stepOp, err := r.syncWorker(ctx, w, desired)
	res.Merge(wr)
	op = stepOp
	return ctrlResult(res), err
}

// desiredPod is the pod the API says should run under key, or nil.
func (r *Reconciler) desiredPod(ctx context.Context, key types.NamespacedName) (*corev1.Pod, error) {
	if pod, ok := r.static.Get(key); ok {
		return pod, nil
	}
	if r.client == nil {
		return nil, nil
	}
	pod := &corev1.Pod{}
	gctx, cancel := context.WithTimeout(ctx, apiReadTimeout)
	defer cancel()
	if err := r.client.Get(gctx, key, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get pod %s: %w", key, err)
	}
	if pod.Spec.NodeName != r.nodeName || podrules.IsMirrorPod(pod) {
		return nil, nil // a mirror pod only reflects a static pod; it never runs by itself
	}
	return pod, nil
}

// apiReadTimeout bounds a read of the pod cache, which blocks while the API server is unreachable.
const apiReadTimeout = 5 * time.Second

// result collects when a pod wants to be looked at again.
type result = podsyncer.Requeue

// ctrlResult is the controller's result for r.
func ctrlResult(r result) ctrl.Result { return ctrl.Result{RequeueAfter: r.After} }

// Enqueue asks for a sync of the pod namespace/name (for the probes' result changes).
func (r *Reconciler) Enqueue(key types.NamespacedName) { r.enqueue(key) }

// EnqueueUIDs asks the workers of these pods to sync them (the device manager: their devices' health
// changed). Pods the node does not have are left.
func (r *Reconciler) EnqueueUIDs(uids []types.UID) {
	r.mu.Lock()
	var keys []types.NamespacedName
	for _, uid := range uids {
		if w, ok := r.workers[uid]; ok {
			keys = append(keys, w.Key)
		}
	}
	r.mu.Unlock()
	for _, k := range keys {
		r.enqueue(k)
	}
}

// staticSeen reports whether every configured static pod source has been read at least once.
func (r *Reconciler) staticSeen() bool {
	return r.static.SeenSources(r.staticKinds...)
}

// Timeline is the start timeline of the pod of that namespace and name on the node.
func (r *Reconciler) Timeline(namespace, name string) (timeline.Timeline, bool) {
	return r.timeline.Get(namespace, name)
}
