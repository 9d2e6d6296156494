// Package eviction is the kubelet's eviction manager: it observes the node's eviction signals
// (memory.available, nodefs/imagefs available and inodes free, pid.available, allocatableMemory.available)
// from the node's stats summary, compares them with the evictionHard and evictionSoft thresholds (grace
// periods, minimum reclaim, the pressure transition period), reports the node's pressure conditions,
// rejects pods at admission under pressure, reclaims node-level resources (dead containers, unused
// images) and, when that is not enough, evicts one pod per pass, ranked as the kubelet ranks them. With
// localStorageCapacityIsolation it first evicts, on every pass, each pod past an emptyDir's sizeLimit, its
// ephemeral-storage limit or a container's.
package eviction
