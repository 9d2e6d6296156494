package runtime

import (
	"context"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Connector validates the runtime connection at start: it calls Version, retrying with back-off until
// the runtime answers, so that a runtime that starts after the agent is waited for, not a crash. It is a
// manager Runnable; Connected is closed once the runtime answered.
type Connector struct {
	Client  *Client
	Clock   clock.Clock
	Backoff Backoff

	once      sync.Once
	connected chan struct{}
	version   *runtimeapi.VersionResponse
}

func (c *Connector) init() { c.once.Do(func() { c.connected = make(chan struct{}) }) }

// Start waits for the runtime; it returns nil when ctx ends first (shutdown is no failure).
func (c *Connector) Start(ctx context.Context) error {
	c.init()
	b := c.Backoff
	if b.Initial == 0 {
		b = DefaultBackoff
	}
	v, err := WaitForRuntime(ctx, c.Client, c.Clock, b)
	if err != nil {
		return nil //nolint:nilerr // ctx ended: the manager is stopping
	}
	c.version = v
	close(c.connected)
	return nil
}

// Connected is closed once the runtime answered Version.
func (c *Connector) Connected() <-chan struct{} {
	c.init()
	return c.connected
}
