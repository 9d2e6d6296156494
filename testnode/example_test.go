package testnode_test

import (
	"context"
	"log"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nodelet/nodelet/testnode"
)

// A node for an envtest suite: pods bound to node-a (spec.nodeName: node-a) run on it until deleted.
func ExampleStart() {
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = env.Stop() }()

	n, err := testnode.Start(context.Background(), cfg, testnode.Options{Name: "node-a"}) // registers Node node-a, Ready
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = n.Stop() }()
	// Create pods with spec.nodeName "node-a"; annotate a container "testnode.nodelet.io/<name>:
	// exit=0,after=2s" to complete it, as a Job's pod.
}
