// Package staticpods will own the kubelet's file and HTTP pod sources: the staticPodPath directory
// (fsnotify plus a periodic re-read) and staticPodURL (polled), manifest decoding, defaulting and
// validation, static pod naming and UID hashing, the static pod store, and the GenericEvent source that
// feeds the Pod reconciler.
//
// It must not know about mirror pods' API objects beyond what the mirror pod reconciler asks of it.
//
// Status: the package is reserved by the layout; its sources arrive with the static pods work item.
package staticpods
