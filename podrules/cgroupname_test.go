package podrules

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The kubelet's pod cgroups (pkg/kubelet/cm: the QoS container manager's kubepods/burstable and
// kubepods/besteffort, the pod container manager's pod<uid>), in each driver's layout.
func TestPodCgroupName(t *testing.T) {
	const uid = "1234-abcd"
	tests := []struct {
		name                   string
		root                   string
		class                  corev1.PodQOSClass
		wantCgroupfs, wantUnit string
	}{
		{"guaranteed", "/", corev1.PodQOSGuaranteed, "/kubepods/pod1234-abcd", "/kubepods.slice/kubepods-pod1234_abcd.slice"},
		{"burstable", "/", corev1.PodQOSBurstable, "/kubepods/burstable/pod1234-abcd",
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd.slice"},
		{"besteffort, root unset", "", corev1.PodQOSBestEffort, "/kubepods/besteffort/pod1234-abcd",
			"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1234_abcd.slice"},
		{"under a custom root", "/custom/root/", corev1.PodQOSBurstable, "/custom/root/kubepods/burstable/pod1234-abcd",
			"/custom.slice/custom-root.slice/custom-root-kubepods.slice/custom-root-kubepods-burstable.slice/custom-root-kubepods-burstable-pod1234_abcd.slice"},
		{"an unknown class lives with the Guaranteed pods", "/", "Unknown", "/kubepods/pod1234-abcd", "/kubepods.slice/kubepods-pod1234_abcd.slice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := PodCgroupName(KubepodsCgroupName(tt.root), tt.class, uid)
			if got := name.Path(CgroupDriverCgroupfs); got != tt.wantCgroupfs {
				t.Errorf("cgroupfs path %q, want %q", got, tt.wantCgroupfs)
			}
			if got := name.Path(CgroupDriverSystemd); got != tt.wantUnit {
				t.Errorf("systemd path %q, want %q", got, tt.wantUnit)
			}
			unit, _ := name.SystemdUnit()
			if got, ok := PodUIDFromCgroup(unit, CgroupDriverSystemd); !ok || got != uid {
				t.Errorf("PodUIDFromCgroup of the slice = %q, %v; want %q", got, ok, uid)
			}
		})
	}
}

func TestQoSCgroupName(t *testing.T) {
	kubepods := KubepodsCgroupName("/")
	want := map[corev1.PodQOSClass]string{
		corev1.PodQOSGuaranteed: "/kubepods", corev1.PodQOSBurstable: "/kubepods/burstable", corev1.PodQOSBestEffort: "/kubepods/besteffort",
	}
	if len(QoSClasses) != len(want) {
		t.Fatalf("QoSClasses = %v, want the three classes", QoSClasses)
	}
	for _, class := range QoSClasses {
		if got := QoSCgroupName(kubepods, class).ToCgroupfs(); got != want[class] {
			t.Errorf("QoSCgroupName(%s) = %q, want %q", class, got, want[class])
		}
	}
}
