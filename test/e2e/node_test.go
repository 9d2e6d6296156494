package e2e

import (
	"context"
	"net"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("Node", Ordered, func() {
	It("registers the node with containerd's version and turns Ready within 10 s of starting", func() {
		bed("stop", "nodelet")
		// A fresh registration: the node object goes and nodelet creates it again.
		n := &corev1.Node{}
		n.Name = nodeName
		Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), n))).To(Succeed())
		start := time.Now()
		bed("start", "nodelet")
		Eventually(func(g Gomega) {
			g.Expect(nodeCondition(getNode(g), corev1.NodeReady).Status).To(Equal(corev1.ConditionTrue))
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		report("node Ready %.2fs after `bed.sh start nodelet` began", time.Since(start).Seconds())

		v, err := cri.Version(context.Background())
		Expect(err).NotTo(HaveOccurred())
		node := getNode(Default)
		// The kubelet's form: the runtime's version parsed (semantic, else generic) and printed back:
		// "v2.4.2" is 2.4.2, Debian's "1.6.20~ds1" is 1.6.20.
		parsed, err := utilversion.ParseSemantic(v.RuntimeVersion)
		if err != nil {
			parsed, err = utilversion.ParseGeneric(v.RuntimeVersion)
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(node.Status.NodeInfo.ContainerRuntimeVersion).To(Equal(v.RuntimeName + "://" + parsed.String()))
		Expect(node.Status.NodeInfo.ContainerRuntimeVersion).To(HavePrefix("containerd://"))
		Expect(node.Status.NodeInfo.KubeletVersion).To(HavePrefix("v1.37"))
		Expect(node.Labels).To(HaveKeyWithValue(corev1.LabelHostname, nodeName))
		Expect(node.Labels).To(HaveKeyWithValue(corev1.LabelOSStable, "linux"))
		ip := ""
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
			}
		}
		Expect(net.ParseIP(ip)).NotTo(BeNil())
		Expect(net.ParseIP(ip).IsLoopback()).To(BeFalse())
		Expect(node.Status.Capacity.Cpu().Value()).To(BeNumerically(">", 0))
		Expect(node.Status.Allocatable.Memory().Cmp(*node.Status.Capacity.Memory())).To(Equal(-1))
		Expect(node.Status.DaemonEndpoints.KubeletEndpoint.Port).To(BeEquivalentTo(10250))

		// An image the runtime pulls shows up in the node's image list at the next status update.
		_, err = cri.PullImage(context.Background(), &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:1.37"}, nil, nil)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(getNode(g).Status.Images).To(ContainElement(
				HaveField("Names", ContainElement("docker.io/library/busybox:1.37"))))
		}, 15*time.Second, 250*time.Millisecond).Should(Succeed())
	})

	It("renews its Lease about every 10 s", func() {
		lease := func(g Gomega) *coordinationv1.Lease {
			l := &coordinationv1.Lease{}
			g.Expect(k8s.Get(context.Background(), types.NamespacedName{Namespace: "kube-node-lease", Name: nodeName}, l)).To(Succeed())
			return l
		}
		first := lease(Default)
		Expect(*first.Spec.HolderIdentity).To(Equal(nodeName))
		Expect(*first.Spec.LeaseDurationSeconds).To(BeEquivalentTo(40))
		// A lease created before the Node was registered gets its owner at the next renewal.
		node := getNode(Default)
		Eventually(func(g Gomega) {
			g.Expect(lease(g).OwnerReferences).To(ContainElement(And(HaveField("Kind", "Node"), HaveField("UID", node.UID))))
		}, 15*time.Second, 250*time.Millisecond).Should(Succeed())
		var renewals []time.Time
		last := first.Spec.RenewTime.Time
		Eventually(func(g Gomega) {
			if t := lease(g).Spec.RenewTime.Time; t.After(last) {
				renewals, last = append(renewals, t), t
			}
			g.Expect(renewals).To(HaveLen(2))
		}, 35*time.Second, 250*time.Millisecond).Should(Succeed())
		interval := renewals[1].Sub(renewals[0])
		report("lease renew interval %.2fs", interval.Seconds())
		Expect(interval).To(BeNumerically("~", 10*time.Second, 2*time.Second))
	})

	It("turns NotReady with the runtime's reason when containerd stops, and Ready when it is back", func() {
		bed("stop", "containerd")
		stopped := time.Now()
		DeferCleanup(func() { bed("start", "containerd") })
		Eventually(func(g Gomega) {
			c := nodeCondition(getNode(g), corev1.NodeReady)
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Reason).To(Equal("KubeletNotReady"))
			g.Expect(c.Message).To(ContainSubstring("container runtime is down"))
		}, 15*time.Second, 100*time.Millisecond).Should(Succeed())
		report("Ready=False %.2fs after containerd stopped", time.Since(stopped).Seconds())
		Expect(readyz()).To(Equal(http.StatusInternalServerError), "readyz fails while the runtime is down")

		bed("start", "containerd")
		started := time.Now()
		Eventually(func(g Gomega) {
			g.Expect(nodeCondition(getNode(g), corev1.NodeReady).Status).To(Equal(corev1.ConditionTrue))
		}, 15*time.Second, 100*time.Millisecond).Should(Succeed())
		report("Ready=True %.2fs after containerd started", time.Since(started).Seconds())
		Expect(readyz()).To(Equal(http.StatusOK))
		bed("status") // nodelet never exited
	})

	It("is marked NotReady by the controller-manager when nodelet stops renewing, and Ready when it returns", func() {
		bed("stop", "nodelet")
		stopped := time.Now()
		DeferCleanup(func() { bed("start", "nodelet") })
		Eventually(func(g Gomega) {
			c := nodeCondition(getNode(g), corev1.NodeReady)
			g.Expect(c.Status).To(Equal(corev1.ConditionUnknown))
			g.Expect(c.Reason).To(Equal("NodeStatusUnknown"))
		}, 60*time.Second, 250*time.Millisecond).Should(Succeed())
		report("node Unknown %.2fs after nodelet stopped (node-monitor-grace-period 20s)", time.Since(stopped).Seconds())

		bed("start", "nodelet")
		Eventually(func(g Gomega) {
			g.Expect(nodeCondition(getNode(g), corev1.NodeReady).Status).To(Equal(corev1.ConditionTrue))
		}, 15*time.Second, 100*time.Millisecond).Should(Succeed())
	})
})

// readyz returns the status code of nodelet's /readyz on the kubelet's healthz address.
func readyz() int {
	resp, err := http.Get("http://127.0.0.1:10248/readyz")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	return resp.StatusCode
}
