package testnode

import (
	"context"
	"net"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"

	"github.com/nodelet/nodelet/internal/simnode"
	"github.com/nodelet/nodelet/runtime/fake"
)

// AnnotationPrefix starts every annotation a test node reads.
const AnnotationPrefix = simnode.AnnotationPrefix

// Script is what a container does, parsed from "exit=<code>,after=<duration>".
type Script = simnode.Script

// ParseScript parses a container's script annotation ("exit=<code>,after=<duration>").
func ParseScript(s string) (Script, error) { return simnode.ParseScript(s) }

// Options configure a test node. Only Name is required.
type Options struct {
	// Name is the Node's name (a DNS subdomain).
	Name string
	// Labels are added to the Node at registration (as --node-labels).
	Labels map[string]string
	// CPU and Memory are the node's capacity (default 4 CPUs, 8 GiB); MaxPods its pod capacity (default 110).
	CPU, Memory resource.Quantity
	MaxPods     int32
	// NodeIP is the node's InternalIP (default 127.0.0.1).
	NodeIP net.IP
	// Logger receives the node's logs (default: controller-runtime's logger).
	Logger logr.Logger
	// ReadyTimeout bounds how long Start waits for the Node to be Ready (default 30 s).
	ReadyTimeout time.Duration
}

// Node is a running test node.
type Node struct{ n *simnode.Node }

// Start registers the Node and runs it until Stop (or ctx ends); it returns once the Node is Ready.
// restConfig is any client configuration allowed to act as the node (envtest's admin configuration, or a
// system:node:<name> credential under the Node authorizer).
func Start(ctx context.Context, restConfig *rest.Config, opts Options) (*Node, error) {
	n, err := simnode.Start(ctx, restConfig, simnode.Options{
		Name: opts.Name, Labels: opts.Labels, CPU: opts.CPU, Memory: opts.Memory, MaxPods: opts.MaxPods,
		NodeIP: opts.NodeIP, Logger: opts.Logger, ReadyTimeout: opts.ReadyTimeout,
	})
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
