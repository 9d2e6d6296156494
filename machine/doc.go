// Package machine reads facts about the host that the Node object reports: identity (machine ID, boot ID,
// kernel, OS image), capacity (CPU, memory, hugepages, the root dir's filesystem) and the eviction signals
// (memory.available, nodefs.available, pid.available).
//
// It reads /proc, /sys and /etc under a configurable root so tests can point it at a fixture tree. It must
// not talk to the API server or the container runtime.
package machine
