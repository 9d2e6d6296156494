// Package testnode runs Kubernetes nodes inside a Go test process, for operator authors whose envtest
// suites have an API server and etcd but no node: a Deployment never gets a running pod there, and a Job
// never completes. A test node is a real nodelet — its pod, node and lease reconcilers, status computation,
// restart back-off, probes and events are the ones a real node runs — on a simulated container runtime:
// no root, no containerd, no mounts (volumes are not set up, no files written but a few under a temporary
// directory).
//
//	n, err := testnode.Start(ctx, restConfig, testnode.Options{Name: "node-a"}) // registers Node node-a, Ready
//	defer n.Stop()
//
// Pods bound to the node (spec.nodeName) run: every image pulls, containers run until the pod is deleted,
// and every probe succeeds. A pod scripts its containers with annotations:
//
//	testnode.nodelet.io/<container-name>: "exit=<code>,after=<duration>"  // e.g. "exit=0,after=2s" completes
//	testnode.nodelet.io/<container-name>.ready: "false"                  // held unready
//	testnode.nodelet.io/<container-name>.live: "false"                   // liveness probe fails
//
// Several nodes may run in one process. Stop removes nothing from the API server: the node goes NotReady
// when its lease expires, as a real one that stops.
package testnode
