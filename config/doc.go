// Package config owns nodelet's configuration and nothing else.
//
// It turns a command line and an optional kubelet config file into a
// validated Config: the file is an unmodified kubelet
// KubeletConfiguration (kubelet.config.k8s.io/v1beta1, YAML or JSON,
// decoded strictly), the flags carry the kubelet's names and override the
// file only when given, and the kubelet's defaults fill every unset field.
// Relative paths in the file are resolved against the file's directory, as
// the kubelet does.
//
// The package only reads the local command line, the config file and the
// host name. It never contacts the API server or the container runtime and
// never reads cluster state (no dynamic or remote configuration); callers
// build clients from Config.Kubeconfig and the CRI endpoints themselves.
// Helpers such as ParseThresholds, Reserved, RuntimeEndpoint and
// ImageEndpoint interpret configured values for other packages without
// side effects.
package config
