package eviction

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// memcgNotifier is a cgroup v1 memory threshold notification: the kernel signals an eventfd when the
// memory cgroup's usage crosses a threshold (cgroup.event_control on memory.usage_in_bytes), so memory
// pressure is noticed at once rather than at the next pass.
type memcgNotifier struct {
	eventfd, stopfd int
	done            chan struct{}
}

// updateNotifier re-arms the notifier every notifierRefreshInterval for the memory.available threshold:
// the usage at which available memory reaches the threshold is capacity - threshold + inactive file
// pages (the kubelet's memoryThresholdNotifier).
func (m *Manager) updateNotifier(ctx context.Context, mem *statsapi.MemoryStats, now time.Time) {
	if m.opts.MemoryCgroup == "" || m.notifierDisabled || now.Sub(m.notifierUpdated) < notifierRefreshInterval {
		return
	}
	t, ok := m.memoryThreshold()
	if !ok || mem == nil || mem.UsageBytes == nil || mem.WorkingSetBytes == nil || mem.AvailableBytes == nil {
		return
	}
	m.notifierUpdated = now
	log := logr.FromContextOrDiscard(ctx)
	inactive := int64(*mem.UsageBytes) - int64(*mem.WorkingSetBytes)
	capacity := int64(*mem.AvailableBytes + *mem.WorkingSetBytes)
	threshold := capacity - quantity(t.Value, capacity) + inactive
	m.stopNotifier()
	n, err := startMemcgNotifier(m.opts.MemoryCgroup, threshold, m.wake)
	if err != nil {
		log.Info("Eviction manager: failed to create memory threshold notifier", "err", err.Error())
		m.notifierDisabled = true
		return
	}
	log.V(3).Info("Eviction manager: setting notifier to capacity", "capacity", threshold)
	m.notifier = n
}

func (m *Manager) stopNotifier() {
	if m.notifier != nil {
		m.notifier.stop()
		m.notifier = nil
	}
}

// startMemcgNotifier registers an eventfd for usage crossing threshold bytes on the memory cgroup dir and
// sends on wake (without blocking) each time it fires.
func startMemcgNotifier(dir string, threshold int64, wake chan<- struct{}) (*memcgNotifier, error) {
	watch, err := os.Open(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return nil, err
	}
	defer watch.Close()
	control, err := os.OpenFile(filepath.Join(dir, "cgroup.event_control"), os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	defer control.Close()
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	if _, err := fmt.Fprintf(control, "%d %d %d", efd, watch.Fd(), threshold); err != nil {
		_ = unix.Close(efd)
		return nil, fmt.Errorf("register memory threshold: %w", err)
	}
	stopfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(efd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	n := &memcgNotifier{eventfd: efd, stopfd: stopfd, done: make(chan struct{})}
	go n.run(wake)
	return n, nil
}

// run waits for the threshold's events (or stop) and forwards each event without blocking.
func (n *memcgNotifier) run(wake chan<- struct{}) {
	defer close(n.done)
	buf := make([]byte, 8)
	for {
		fds := []unix.PollFd{{Fd: int32(n.eventfd), Events: unix.POLLIN}, {Fd: int32(n.stopfd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents&unix.POLLIN == 0 {
			continue
		}
		if _, err := unix.Read(n.eventfd, buf); err != nil {
			continue
		}
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

func (n *memcgNotifier) stop() {
	_, _ = unix.Write(n.stopfd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	<-n.done
	_ = unix.Close(n.eventfd)
	_ = unix.Close(n.stopfd)
}
