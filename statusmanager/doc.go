// Package statusmanager is the one writer of pod status, as the kubelet's status manager.
//
// The pod syncer sets the status a pod should have (SetPodStatus, with a function that builds it from the
// status the API holds); the manager keeps the status last set for each pod (the base the next one is
// built on), finds the API object that carries it (the pod, or a static pod's mirror pod), and writes what
// the agent owns of it when that differs from what the API holds: a two-way strategic merge patch from
// the status the API is believed to hold, with the object's UID as a precondition. It remembers each write
// so that a status someone else wrote since is written back (Overwritten), and so that two writes in flight
// before the cache sees either are diffed against the right base.
//
// Nothing else in nodelet writes pod status.
package statusmanager
