package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/config"
)

func TestNewValidates(t *testing.T) {
	if _, err := New(context.Background(), Options{}); err == nil || !strings.Contains(err.Error(), "Config is required") {
		t.Errorf("New without a config: %v", err)
	}
	cfg := config.Default("node-a")
	cfg.RootDir = t.TempDir()
	cfg.Kubelet.MaxPods = -1
	if _, err := New(context.Background(), Options{Config: cfg}); err == nil || !strings.Contains(err.Error(), "maxPods") {
		t.Errorf("New with an invalid config: %v", err)
	}
}
