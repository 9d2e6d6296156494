// Package userns gives pods that ask for it (spec.hostUsers: false) a user namespace of their own, as the
// kubelet's user namespace manager: each such pod gets a range of idsPerPod host IDs (65536 by default)
// out of the node's range — the subordinate IDs of the "kubelet" user (getsubids), or, without that user,
// every ID from idsPerPod up — mapped to IDs 0..idsPerPod-1 inside the pod, the same range for UIDs and
// GIDs. The range is recorded in the pod's directory (<root>/pods/<uid>/userns, the kubelet's file and
// JSON), so an agent restart and a takeover from or by the kubelet keep every running pod's range, and
// no two pods ever share one.
//
// A pod's range is released once the pod has terminated, and by housekeeping for pods the node no longer
// has. A runtime handler that does not announce user namespace support (the CRI RuntimeStatus' handler
// features) gets no user namespaced pod: its sandbox fails with the kubelet's message.
package userns
