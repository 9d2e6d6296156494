// Package volumes prepares and tears down the volumes of the pods bound to this node, as the kubelet's
// volume manager and in-tree plugins do: emptyDir (on disk, or tmpfs for medium Memory), hostPath (with
// its type checks), configMap, secret, downwardAPI and projected volumes (configMap, secret, downwardAPI
// service account token, clusterTrustBundle and podCertificate sources), inline CSI volumes, and persistentVolumeClaim and generic
// ephemeral volumes. It also prepares the CRI mounts of a container: readOnly, subPath and subPathExpr
// (bind-mounted safely under the pod's volume-subpaths directory), mount propagation and recursive
// read-only mounts.
//
// The Manager holds the pods' volume state; each kind of volume is a type of its own over it (groups.go):
// sourceVolumes (emptyDir, ConfigMap, Secret, downward API, projected, tokens), claimVolumes (claims, local
// and hostPath persistent volumes, node expansion), csiVolumes, blockVolumes and subPaths.
//
// # Claims
//
// A claim (a persistentVolumeClaim volume's, or the claim <pod>-<volume> of a generic ephemeral volume,
// which the pod must control) is resolved to the PersistentVolume bound to it as the kubelet's
// desired-state populator does: found, not being deleted, Bound, the volume's claimRef pointing back at
// it, its volumeMode matching volumeMounts or volumeDevices. Otherwise SetUp returns a *ClaimError with
// the kubelet's message and the pod waits. A volume set up stays with the claim it was set up for. The
// volume is then set up by its plugin: hostPath (its type checks), local (a bind mount of the directory at
// <pod>/volumes/kubernetes.io~local-volume/<pv>, read-only for a read-only claim, given the pod's fsGroup)
// or CSI.
//
// # CSI
//
// As the kubelet's CSI plugin: the driver (a CSIDrivers, registered through the plugin watcher of
// volumes/csi) stages a persistent volume once per node at
// <root>/plugins/kubernetes.io/csi/<driver>/<sha256 of the handle>/globalmount and publishes it for each
// pod at <pod>/volumes/kubernetes.io~csi/<spec name>/mount, each with the kubelet's vol_data.json beside
// it. The CSIDriver object says whether the volume is attached first (then it is listed in the node's
// status.volumesInUse before anything is mounted, and its VolumeAttachment must be attached; its
// attachment metadata is the publish context), whether the driver gets the pod's information, how the
// pod's fsGroup is applied, which service account tokens it gets and which lifecycle modes it supports.
// Teardown finds a pod's CSI volumes from their vol_data.json — those published before a restart or by
// the kubelet before a takeover too —, unpublishes them, and unstages a volume once no pod on the node
// has it published; a volume published on disk stays in volumesInUse until then, and a volume staged
// with no pod is unstaged by CleanUpStaged. A running pod's published volume is adopted, not published
// again. Stats come from the driver's NodeGetVolumeStats, and each claim gets the kubelet_volume_stats_*
// series.
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
//   - get csidrivers/<name> (kept a short while) and get volumeattachments/<name> of the pod's CSI
//     volumes on this node;
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
