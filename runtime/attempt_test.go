package runtime

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
)

func TestAttempt(t *testing.T) {
	tests := []struct {
		name string
		c    *ContainerStatus
		want podrules.Attempt
	}{
		{name: "no attempt", c: nil, want: podrules.Attempt{State: podrules.NoAttempt}},
		{name: "created", c: &ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_CREATED},
			want: podrules.Attempt{State: podrules.AttemptCreated}},
		{name: "running", c: &ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			want: podrules.Attempt{State: podrules.AttemptRunning}},
		{name: "exited keeps its code", c: &ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: 42},
			want: podrules.Attempt{State: podrules.AttemptExited, ExitCode: 42}},
		{name: "unknown", c: &ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_UNKNOWN, ExitCode: 3},
			want: podrules.Attempt{State: podrules.AttemptUnknown}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.Attempt(); got != tt.want {
				t.Errorf("Attempt() = %+v, want %+v", got, tt.want)
			}
		})
	}
}
