// Package staticpods owns the kubelet's file and HTTP pod sources: the staticPodPath directory or file
// (fsnotify plus a full re-read every fileCheckFrequency) and staticPodURL (polled every
// httpCheckFrequency), the decoding, defaulting and validation of their manifests, static pod naming and
// UID hashing, and the Store that merges the sources' snapshots and announces every change as a
// controller-runtime GenericEvent.
//
// Bad input never stops a source: each problem is handed to a Reporter once, the other manifests keep
// working, and a manifest that fails to read or decode keeps the pods of its last good read, so a running
// static pod is never killed by a later failure.
//
// It must not know about mirror pods' API objects beyond what the mirror pod reconciler asks of it
// (the annotation names; podrules decides whether a pod is static or a mirror).
package staticpods
