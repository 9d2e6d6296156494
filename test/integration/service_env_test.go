package integration_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
)

var _ = Describe("Service environment variables", func() {
	var (
		ns, nodeName string
		rt           *fake.Runtime
		ctx          = context.Background()
	)

	BeforeEach(func() {
		nodeName = "svcenv-" + utilrand.String(6)
		ns = "ns-" + utilrand.String(6)
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		var cri *runtime.Client
		rt, cri = startFakeRuntime()
		rt.AddImage("docker.io/library/busybox:latest", 1<<20)
		newPodBed(nodeName, rt, cri)
	})

	// envOf is the environment the pod's container was created with.
	envOf := func(g Gomega, podName string) map[string]string {
		for _, c := range rt.Containers() {
			if c.Labels[runtime.LabelPodName] != podName {
				continue
			}
			cfg := rt.ContainerConfig(c.Id)
			g.Expect(cfg).NotTo(BeNil())
			env := map[string]string{}
			for _, kv := range cfg.Envs {
				env[kv.Key] = string(kv.Value)
			}
			return env
		}
		g.Expect("no container for pod " + podName).To(BeEmpty())
		return nil
	}

	It("gives pods the kubernetes service always and their namespace's services with enableServiceLinks", func() {
		master := &corev1.Service{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: "default", Name: "kubernetes"}, master)).To(Succeed())
		db := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-db"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
				{Name: "sql", Port: 5432, TargetPort: intstr.FromInt32(5432), Protocol: corev1.ProtocolTCP}}},
		}
		Expect(admin.Create(ctx, db)).To(Succeed())
		Expect(db.Spec.ClusterIP).NotTo(BeEmpty())

		Expect(admin.Create(ctx, busyboxPod(ns, "linked", nodeName, func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{
				{Name: "API", Value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
				{Name: "MY_DB_SERVICE_PORT", Value: "overridden"},
			}
		}))).To(Succeed())
		Eventually(func(g Gomega) {
			env := envOf(g, "linked")
			g.Expect(env).To(HaveKeyWithValue("KUBERNETES_SERVICE_HOST", master.Spec.ClusterIP))
			g.Expect(env).To(HaveKeyWithValue("KUBERNETES_SERVICE_PORT", "443"))
			g.Expect(env).To(HaveKeyWithValue("API", "https://"+master.Spec.ClusterIP+":443"))
			g.Expect(env).To(HaveKeyWithValue("MY_DB_SERVICE_HOST", db.Spec.ClusterIP))
			g.Expect(env).To(HaveKeyWithValue("MY_DB_SERVICE_PORT_SQL", "5432"))
			g.Expect(env).To(HaveKeyWithValue("MY_DB_PORT_5432_TCP_ADDR", db.Spec.ClusterIP))
			g.Expect(env).To(HaveKeyWithValue("MY_DB_SERVICE_PORT", "overridden"), "the container's own variable wins")
		}).Should(Succeed())

		Expect(admin.Create(ctx, busyboxPod(ns, "unlinked", nodeName, func(p *corev1.Pod) {
			p.Spec.EnableServiceLinks = ptr.To(false)
		}))).To(Succeed())
		Eventually(func(g Gomega) {
			env := envOf(g, "unlinked")
			g.Expect(env).To(HaveKeyWithValue("KUBERNETES_SERVICE_HOST", master.Spec.ClusterIP))
			g.Expect(env).NotTo(HaveKey("MY_DB_SERVICE_HOST"))
		}).Should(Succeed())
	})
})
