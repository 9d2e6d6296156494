package controllers_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/controllers"
	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/staticpods"
)

var _ = Describe("Mirror pod reconciler", func() {
	var (
		ns       string
		nodeName string
		ctx      = context.Background()
	)

	BeforeEach(func() {
		nodeName = "mirror-" + utilrand.String(6)
		ns = "ns-" + utilrand.String(6)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	})

	// A mirror pod left by the agent's previous run, of a static pod the URL serves.
	mirrorPod := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "etcd-" + nodeName,
				Annotations: map[string]string{podrules.ConfigMirrorAnnotation: "0123456789abcdef"}},
			Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}},
		}
	}

	It("keeps mirror pods until every static pod source was read once", func() {
		mirror := mirrorPod()
		Expect(admin.Create(ctx, mirror)).To(Succeed())
		var reachable atomic.Bool
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if !reachable.Load() {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK) // an empty body: no static pods any more
		}))
		DeferCleanup(srv.Close)

		store := staticpods.NewStore(nodeName, nil)
		mgr := newNodeManager(nodeName)
		Expect(mgr.Add(&staticpods.URLSource{URL: srv.URL, Period: 100 * time.Millisecond, Clock: clock.RealClock{}, Store: store})).To(Succeed())
		r := &controllers.MirrorPodReconciler{Client: mgr.GetClient(), Static: store, StaticKinds: []string{staticpods.SourceHTTP},
			NodeName: nodeName, NodeUID: func(context.Context) types.UID { return "" }}
		Expect(r.SetupWithManager(mgr)).To(Succeed())
		startManager(mgr)

		key := types.NamespacedName{Namespace: ns, Name: mirror.Name}
		Consistently(func() error { return admin.Get(ctx, key, &corev1.Pod{}) }, "3s", "200ms").Should(Succeed(),
			"the mirror pod stays while the static pod URL has not answered")
		reachable.Store(true)
		Eventually(func() bool { return apierrors.IsNotFound(admin.Get(ctx, key, &corev1.Pod{})) }).
			WithTimeout(10*time.Second).Should(BeTrue(), "once the URL said there are no static pods, the mirror pod goes")
	})

	It("refuses to run without a static pod source", func() {
		r := &controllers.MirrorPodReconciler{Static: staticpods.NewStore(nodeName, nil), NodeName: nodeName}
		Expect(r.SetupWithManager(newNodeManager(nodeName))).To(MatchError(ContainSubstring("no static pod source")))
	})
})
