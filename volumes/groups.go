package volumes

// The Manager's volume kinds, each a type of its own over the Manager's state.

// csiVolumes is the CSI volumes: stage, publish, attach waits and limits, unpublish, unstage.
type csiVolumes struct{ *Manager }

func (m *Manager) csiv() csiVolumes { return csiVolumes{m} }

// blockVolumes is the block volumes: CSI and local, mapped to the pods and held by loop devices.
type blockVolumes struct{ *Manager }

func (m *Manager) blockv() blockVolumes { return blockVolumes{m} }

// claimVolumes is the persistentVolumeClaim volumes: claims resolved to their volumes, local and hostPath ones mounted, node expansion, their stats.
type claimVolumes struct{ *Manager }

func (m *Manager) claimv() claimVolumes { return claimVolumes{m} }

// sourceVolumes is the volumes made from the API and the node: emptyDir, ConfigMap, Secret, downward API, projected, service account tokens.
type sourceVolumes struct{ *Manager }

func (m *Manager) srcv() sourceVolumes { return sourceVolumes{m} }

// subPaths is the containers' subPath mounts.
type subPaths struct{ *Manager }

func (m *Manager) subp() subPaths { return subPaths{m} }
