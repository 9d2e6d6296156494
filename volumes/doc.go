// Package volumes prepares and tears down the volumes of the pods bound to this node, as the kubelet's
// volume manager and in-tree plugins do: emptyDir (on disk, or tmpfs for medium Memory), hostPath (with
// its type checks), configMap, secret, downwardAPI and projected volumes (configMap, secret, downwardAPI
// and service account token sources), and persistentVolumeClaim volumes: the claim is resolved to the
// PersistentVolume bound to it as the kubelet's desired-state populator does (found, not being deleted,
// Bound, the volume's claimRef pointing back at it, its volumeMode matching volumeMounts or
// volumeDevices; otherwise a *ClaimError with the kubelet's message and the pod waits), then set up by
// the volume's plugin: hostPath (its type checks) and local (a bind mount of the directory at
// <pod>/volumes/kubernetes.io~local-volume/<pv>, read-only for a read-only claim, given the pod's
// fsGroup). A volume set up stays with the claim it was set up for. It also prepares the CRI mounts of a container: readOnly, subPath
// and subPathExpr (bind-mounted safely under the pod's volume-subpaths directory), mount propagation and
// recursive read-only mounts.
//
// Layout on the host, as the kubelet's:
//
//	<root>/pods/<uid>/volumes/kubernetes.io~<plugin>/<volume>   one directory per volume
//	<root>/pods/<uid>/volume-subpaths/<volume>/<container>/<i>  bind mounts of subPath volumeMounts
//
// configMap, secret, downwardAPI and projected contents are written by an atomic writer: the files
// live in a timestamped directory (..2026_11_22_10_00_00.123456789), a ..data symlink points at it and
// is swapped with a rename, and the user-visible names are symlinks through ..data. A reader never sees
// a half-written set; contents are re-written only when they changed. secret, downwardAPI and projected
// volumes live on tmpfs; configMap volumes on disk.
//
// # What nodelet reads from the API server
//
// Only what the pods bound to this node reference, by name — never a list or watch of Secrets or
// ConfigMaps, so a node holds no cluster-wide cache of them:
//
//   - get secrets/<name> and get configmaps/<name> in the pod's namespace, for each secret, configMap and
//     projected volume source (CachedObjects keeps each object a short while, per object);
//   - get persistentvolumeclaims/<name> in the pod's namespace and get persistentvolumes/<name> of the
//     volume bound to it, fresh on every try until the volume is set up;
//   - create serviceaccounts/<name>/token (the TokenRequest API) for the pod's service account, with
//     the pod as the bound object, for projected serviceAccountToken sources.
//
// These are exactly what the API server's Node authorizer grants system:node:<nodeName> for pods bound
// to the node (and what NodeRestriction admits for bound tokens), so nodelet needs no RBAC beyond the
// system:nodes group; a deployment with RBAC instead needs get on secrets, configmaps,
// persistentvolumeclaims and persistentvolumes and create on serviceaccounts/token.
//
// # What it must not touch
//
// The container runtime (the caller passes the mounts from Mounts to the CRI) and the API server beyond
// Objects. It raises no events: the caller turns the errors of SetUp into FailedMount events.
package volumes
