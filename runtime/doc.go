// Package runtime is nodelet's side of the Container Runtime Interface (CRI).
//
// It owns the CRI client (RuntimeService and ImageService over gRPC on a unix socket), with per-RPC
// timeouts, response invariants and gRPC errors mapped to sentinel errors; and the translation of a Pod into
// sandbox and container configs. The PLEG and its pod state cache live in runtime/pleg; the in-memory CRI
// server used by tests lives in runtime/fake.
//
// It must not import controllers/: the controllers consume this package through their own small interfaces.
package runtime
