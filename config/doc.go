// Package config owns nodelet's configuration and nothing else.
//
// It turns a command line, an optional kubelet config file and its drop-in
// directory into a validated Config, as the kubelet v1.37 does: the file is
// an unmodified kubelet KubeletConfiguration (kubelet.config.k8s.io/v1beta1,
// YAML or JSON) decoded strictly, or leniently with a notice when only
// unknown or duplicate fields stand in the way; the --config-dir drop-ins
// (*.conf, lexical order) are JSON merge patches over it; every kubelet flag
// is accepted and overrides the files only when given; the kubelet's defaults
// fill every unset field. Relative paths in the file are resolved against the
// file's directory. Flags the kubelet removed are rejected with the reason.
//
// What nodelet accepts but does not act on — fields set to non-default
// values, flags of features it does not have — becomes a
// Notice that the caller logs once at start-up (Config.LogNotices);
// docs/config.md lists those fields.
//
// The package only reads the local command line, the config files and the
// host name. It never contacts the API server or the container runtime and
// never reads cluster state (no dynamic or remote configuration); callers
// build clients from Config.Kubeconfig and the CRI endpoints themselves.
// Helpers such as ParseThresholds, Reserved, RuntimeEndpoint and
// ImageEndpoint interpret configured values for other packages without
// side effects.
package config
