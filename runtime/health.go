package runtime

import (
	"context"
	"fmt"
	"net/http"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// healthTimeout bounds the runtime check behind /readyz.
const healthTimeout = 2 * time.Second

// ReadyCheck is a readiness check (for /readyz): it fails while the runtime does not answer Status or
// does not report RuntimeReady.
func (c *Client) ReadyCheck(req *http.Request) error {
	ctx, cancel := context.WithTimeout(req.Context(), healthTimeout)
	defer cancel()
	resp, err := c.Status(ctx, false)
	if err != nil {
		return err
	}
	for _, cond := range resp.Status.Conditions {
		if cond.Type == runtimeapi.RuntimeReady && !cond.Status {
			return fmt.Errorf("container runtime not ready: %s: %s", cond.Reason, cond.Message)
		}
	}
	return nil
}
