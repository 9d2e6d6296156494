// Package controllers holds nodelet's small reconcilers: the Node (registration and status), its Lease
// and the mirror pods of static pods, and the manager's options (CacheOptions, ClientOptions, RESTMapper)
// and cache indexes. The pods bound to the node — their lifecycle state machine and status — are run by
// package podlifecycle.
//
// Reconcilers are level-triggered: any trigger converges the object they own. They reach the container
// runtime only through small interfaces declared here and implemented by the runtime package; they never
// speak gRPC themselves. Time comes from an injected clock so tests drive it.
package controllers
