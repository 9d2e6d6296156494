package e2e

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

var _ = Describe("Volumes", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("updates a configMap volume in a running container and puts a secret on tmpfs with its modes", func() {
		ctx := context.Background()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cfg"}, Data: map[string]string{"color": "blue"}}
		Expect(k8s.Create(ctx, cm)).To(Succeed())
		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sec"},
			StringData: map[string]string{"password": "hunter2"}})).To(Succeed())
		p := create(shPod(ns, "vols", `while true; do echo "color=$(cat /cfg/color)"; sleep 1; done`, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
				{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: "sec", DefaultMode: ptr.To(int32(0o400))}}},
			}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}, {Name: "sec", MountPath: "/sec"}}
			p.Spec.InitContainers = []corev1.Container{{Name: "inspect", Image: "busybox", Command: []string{"sh", "-c",
				`grep " /sec " /proc/mounts; stat -L -c 'mode=%a' /sec/password; cat /sec/password; echo`},
				VolumeMounts: []corev1.VolumeMount{{Name: "sec", MountPath: "/sec"}}}}
		}))
		Eventually(func(g Gomega) {
			p = getPod(g, ns, "vols")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(containerLog(p, "main", 0)).To(ContainSubstring("color=blue"))
		}, 60*time.Second).Should(Succeed())
		inspect := containerLog(p, "inspect", 0)
		Expect(inspect).To(ContainSubstring("tmpfs"))
		Expect(inspect).To(ContainSubstring("mode=400"))
		Expect(inspect).To(ContainSubstring("hunter2"))
		cm.Data["color"] = "green"
		Expect(k8s.Update(ctx, cm)).To(Succeed())
		start := time.Now()
		Eventually(func() string { return containerLog(p, "main", 0) }, 90*time.Second, time.Second).Should(ContainSubstring("color=green"))
		report("configMap update visible in the container after %.1fs", time.Since(start).Seconds())
	})

	It("shares an emptyDir between containers and keeps it across a container restart", func() {
		p := create(shPod(ns, "shared", `if [ -f /data/first ]; then echo restarted; cat /data/note; sleep 3600; fi; touch /data/first; sleep 1; exit 1`, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
			p.Spec.InitContainers = []corev1.Container{{Name: "writer", Image: "busybox", Command: []string{"sh", "-c", "echo from-writer > /data/note"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}
		}))
		Eventually(func(g Gomega) {
			p = getPod(g, ns, "shared")
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">=", 1))
			g.Expect(containerLog(p, "main", 1)).To(ContainSubstring("from-writer"))
		}, 60*time.Second).Should(Succeed())
	})

	It("gives a pod a projected service account token that authenticates as the pod", func() {
		p := create(shPod(ns, "token", `cat /var/run/secrets/kubernetes.io/serviceaccount/token; echo; sleep 3600`,
			func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = nil }))
		var token string
		Eventually(func(g Gomega) {
			p = getPod(g, ns, "token")
			log := containerLog(p, "main", 0)
			g.Expect(log).To(ContainSubstring(" F ey"))
			for _, line := range strings.Split(log, "\n") {
				if i := strings.Index(line, " F ey"); i >= 0 {
					token = strings.TrimSpace(line[i+3:])
				}
			}
		}, 60*time.Second).Should(Succeed())
		tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
		Expect(k8s.Create(context.Background(), tr)).To(Succeed())
		Expect(tr.Status.Authenticated).To(BeTrue(), tr.Status.Error)
		Expect(tr.Status.User.Username).To(Equal("system:serviceaccount:" + ns + ":default"))
		Expect(tr.Status.User.Extra["authentication.kubernetes.io/pod-name"]).To(ConsistOf("token"))
	})
})

var _ = Describe("Probes", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("restarts a container whose exec liveness probe starts failing", func() {
		create(shPod(ns, "live", `touch /tmp/healthy; sleep 3; rm /tmp/healthy; sleep 3600`, func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
				PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 1}
		}))
		Eventually(func(g Gomega) {
			cs := getPod(g, ns, "live").Status.ContainerStatuses
			g.Expect(cs).To(HaveLen(1))
			g.Expect(cs[0].RestartCount).To(BeNumerically(">=", 1))
		}, 60*time.Second).Should(Succeed())
	})

	It("flips Ready both ways with an httpGet readiness probe against busybox httpd", func() {
		create(shPod(ns, "ready", `mkdir -p /www; httpd -p 8080 -h /www; while true; do touch /www/ok; sleep 5; rm /www/ok; sleep 5; done`, func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("http")}},
				PeriodSeconds: 1, FailureThreshold: 1}
		}))
		seen := map[bool]int{}
		last := false
		Eventually(func(g Gomega) {
			p := getPod(g, ns, "ready")
			ready := podCondition(p, corev1.PodReady) == corev1.ConditionTrue
			if ready != last || seen[ready] == 0 {
				seen[ready]++
				last = ready
			}
			g.Expect(seen[true]).To(BeNumerically(">=", 1))
			g.Expect(seen[false]).To(BeNumerically(">=", 2), "ready, then unready again")
		}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("holds back liveness until the startup probe succeeds", func() {
		// Liveness would fail at once (no /tmp/live yet); startup takes 4 s to succeed: no restart may happen.
		create(shPod(ns, "startup", `sleep 4; touch /tmp/started /tmp/live; sleep 3600`, func(p *corev1.Pod) {
			p.Spec.Containers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/started"}}}, PeriodSeconds: 1, FailureThreshold: 30}
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/live"}}}, PeriodSeconds: 1, FailureThreshold: 1}
		}))
		Eventually(func(g Gomega) {
			cs := getPod(g, ns, "startup").Status.ContainerStatuses
			g.Expect(cs).To(HaveLen(1))
			g.Expect(cs[0].Started).To(Equal(ptr.To(true)))
			g.Expect(cs[0].Ready).To(BeTrue())
		}, 60*time.Second).Should(Succeed())
		Expect(getPod(Default, ns, "startup").Status.ContainerStatuses[0].RestartCount).To(BeZero())
	})

	It("keeps a container unready while its tcpSocket probe hits a closed port", func() {
		create(shPod(ns, "tcp", `sleep 3600`, func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9999)}}, PeriodSeconds: 1}
		}))
		Eventually(func(g Gomega) { g.Expect(getPod(g, ns, "tcp").Status.Phase).To(Equal(corev1.PodRunning)) }, 30*time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			p := getPod(g, ns, "tcp")
			g.Expect(p.Status.ContainerStatuses[0].Ready).To(BeFalse())
			g.Expect(podCondition(p, corev1.PodReady)).To(Equal(corev1.ConditionFalse))
		}, 5*time.Second, 500*time.Millisecond).Should(Succeed())
	})
})
