package runtime

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
)

// Attempt is the attempt as the restart decision (podrules.ShouldContainerBeRestarted) sees it; a nil
// attempt is podrules.NoAttempt.
func (c *ContainerStatus) Attempt() podrules.Attempt {
	if c == nil {
		return podrules.Attempt{State: podrules.NoAttempt}
	}
	switch c.State {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return podrules.Attempt{State: podrules.AttemptCreated}
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return podrules.Attempt{State: podrules.AttemptRunning}
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return podrules.Attempt{State: podrules.AttemptExited, ExitCode: c.ExitCode}
	}
	return podrules.Attempt{State: podrules.AttemptUnknown}
}
