// Package volumes will own per-pod volume setup and teardown: emptyDir, hostPath, configMap, secret,
// downwardAPI and projected volumes (service account tokens included), written atomically.
//
// It must not call the container runtime.
//
// Status: the package is reserved by the layout; volume types arrive with the volumes and probes work item.
package volumes
