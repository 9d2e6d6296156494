// Package fake provides an in-memory CRI runtime (runtime and image service)
// served over a real gRPC unix socket, so that nodelet's CRI client and the
// controllers built on it can be tested without containerd.
//
// The package owns:
//   - the Runtime type, the handle a test holds: it serves the CRI runtime
//     service (its parts: the runtime's facts and events, sandboxes,
//     containers, stats) and image service, each a type of its own over one
//     shared state, with containerd-like state machines for pod sandboxes
//     (READY → NOTREADY → removed) and containers
//     (CREATED → RUNNING → EXITED → removed), driven by an injectable clock;
//   - an in-memory image store with a set of "pullable" references standing in
//     for a registry, and the user each image runs as (SetImageUser);
//   - scripting of container behaviour by container name (exit after a delay,
//     start/create failures, ignoring SIGTERM, exec results);
//   - introspection (recorded calls, state snapshots, received pull
//     credentials) and fault injection (errors per CRI method);
//   - a container event stream (GetContainerEvents) for sandbox and container
//     lifecycle events.
//
// Notable containerd-like behaviours: image references are normalised
// ("nginx" is "docker.io/library/nginx:latest"); PullImage returns the image id
// ("sha256:..."); ContainerStatus reports the repo digest as ImageRef while
// ListContainers reports the image id; stopping a missing sandbox or container
// is NotFound while removing one that is already gone succeeds; removing a
// sandbox force-stops and removes its containers.
//
// It does not run processes, set up networking, write logs or serve
// exec/attach/port-forward streams (those return a fake URL).
package fake
