package statusmanager

import (
	"encoding/json"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/nodelet/nodelet/podstatus"
)

// statusWrite is the agent's last status write to an API object: what it sent of what it owns, and the
// object's resourceVersion before and after the write.
type statusWrite struct {
	uid  types.UID
	sent *corev1.PodStatus
	// versions are the object's resource versions the agent's recent writes were computed against or
	// made (the last maxKnownVersions), the newest last: none is newer than the last write.
	versions []string
}

// maxKnownVersions bounds statusWrite.versions: more writes than this in flight before the cache sees one
// of them do not happen.
const maxKnownVersions = 16

// next is the record of a write of sent computed against the object at version before that made version
// after, following s (of the same object, or nil).
func (s *statusWrite) next(uid types.UID, before, after string, sent *corev1.PodStatus) *statusWrite {
	var versions []string
	if s != nil && s.uid == uid {
		versions = s.versions
	}
	versions = append(slices.Clone(versions), before, after)
	if len(versions) > maxKnownVersions {
		versions = versions[len(versions)-maxKnownVersions:]
	}
	return &statusWrite{uid: uid, sent: sent, versions: versions}
}

// base is what the API holds of what the agent owns in obj (a cached copy of the object last written):
// what the agent last sent, while obj is a version one of its recent writes was computed against or made
// (the cache has not seen the last write yet: two writes in flight leave it showing the first one's
// version for a while); else obj's own status, whoever wrote it.
func (s *statusWrite) base(obj *corev1.Pod) *corev1.PodStatus {
	if s.holds(obj) {
		return s.sent
	}
	return podstatus.Owned(&obj.Status)
}

// holds reports whether obj is at a version one of the agent's recent writes was computed against or made:
// what the API holds of what the agent owns is what it last sent.
func (s *statusWrite) holds(obj *corev1.Pod) bool {
	return s != nil && s.uid == obj.UID && slices.Contains(s.versions, obj.ResourceVersion)
}

// overwritten reports whether obj's status is no longer what the agent last wrote to it: someone else
// wrote it since. False when the agent never wrote to obj.
func (s *statusWrite) overwritten(obj *corev1.Pod) bool {
	if s == nil || s.uid != obj.UID || s.holds(obj) {
		return false
	}
	return !podstatus.Equal(podstatus.Owned(&obj.Status), s.sent)
}

// statusPatch is the kubelet's status patch: a two-way strategic merge patch from the status the API is
// believed to hold to the new one, plus the pod's UID as a precondition.
func statusPatch(uid types.UID, from, to *corev1.PodStatus) ([]byte, error) {
	oldJSON, err := json.Marshal(corev1.Pod{Status: *from})
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: *to})
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Pod{})
}
