package testnode

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/runtime/fake"
	"github.com/nodelet/nodelet/simnode"
)

// AnnotationPrefix starts every annotation a test node reads.
const AnnotationPrefix = simnode.AnnotationPrefix

// Script is what a container does, parsed from "exit=<code>,after=<duration>".
type Script = simnode.Script

// ParseScript parses a container's script annotation ("exit=<code>,after=<duration>").
func ParseScript(s string) (Script, error) { return simnode.ParseScript(s) }

// Options configure a test node. Only Name is required.
type Options = simnode.Spec

// Node is a running test node.
type Node struct{ n *simnode.Node }

// Start registers the Node and runs it until Stop (or ctx ends); it returns once the Node is Ready.
// restConfig is any client configuration allowed to act as the node (envtest's admin configuration, or a
// system:node:<name> credential under the Node authorizer).
func Start(ctx context.Context, restConfig *rest.Config, opts Options) (*Node, error) {
	n, err := simnode.Start(ctx, restConfig, simnode.Options{Spec: opts})
	if err != nil {
		return nil, err
	}
	return &Node{n: n}, nil
}

// Name is the Node's name.
func (n *Node) Name() string { return n.n.Name() }

// Runtime is the node's simulated runtime, to inspect or script further (fake.Runtime's methods).
func (n *Node) Runtime() *fake.Runtime { return n.n.Runtime() }

// Stop stops the node and waits for it; it removes nothing from the API server. It returns the error the
// node stopped with, if any. Calling it again returns the same.
func (n *Node) Stop() error { return n.n.Stop() }
