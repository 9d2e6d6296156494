// Package imagegc is the kubelet's image garbage collector (pkg/kubelet/images/image_gc_manager.go and
// the image half of Kubelet.StartGarbageCollection, kubelet v1.37).
//
// Every ImageGCPeriod (5 minutes, not configurable in the kubelet either) the Manager
//
//   - detects the runtime's images: when each was first seen and when it was last seen in use, an image
//     being in use while any container the runtime holds — running or exited — names it by image ID (the
//     CRI Container's image_id, else its image_ref, as the kubelet's toKubeContainer);
//   - removes, with imageMaximumGCAge > 0 and once that long has passed since the Manager started, every
//     unused image that has not been used for longer than imageMaximumGCAge (reason "age");
//   - reads the image filesystem — the runtime's first ImageFsInfo image filesystem, whose mountpoint is
//     statfs(2)'d for capacity and available bytes as the kubelet's cadvisor does (the runtime's used bytes
//     are not added to anything, so nothing is counted twice) — and when its usage
//     100 - available*100/capacity is at or above imageGCHighThresholdPercent, removes unused images least
//     recently used first (ties: first detected first), skipping those detected less than
//     imageMinimumGCAge ago, until capacity*(100-imageGCLowThresholdPercent)/100 - available bytes are
//     freed (reason "space").
//
// Images in use, images the runtime reports pinned (the sandbox image of containerd and CRI-O) and the
// Manager's SandboxImage are never removed. Events are the kubelet's, on the Node: FreeDiskSpaceFailed
// when not enough could be freed, InvalidDiskCapacity for an image filesystem of capacity 0, and
// ImageGCFailed when a pass fails twice in a row (the first failure is only logged, as the kubelet's).
// The metric is the kubelet's kubelet_image_garbage_collected_total{reason="age"|"space"}.
// imageGCHighThresholdPercent 100 with imageMaximumGCAge 0 turns image garbage collection off.
//
// The package talks to the runtime only through the consumer-side Runtime interface (a *runtime.Client
// satisfies it) and to the filesystem through Filesystem, so tests run on a fake clock and fake stats.
package imagegc
