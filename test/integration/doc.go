// Package integration holds the whole-agent specs: agent.New on a simulated platform over the in-memory
// runtime (runtime/fake), against a real API server and etcd (envtest) with the node's own credentials under
// the Node authorizer and NodeRestriction. Each spec drives the agent only through the API and the runtime,
// as a user and the container runtime would.
package integration
