// Package lockfile is the kubelet's --lock-file protocol, which lets two node agents hand a node over to
// each other: the holder takes an exclusive flock(2) on the file; with --exit-on-lock-contention it watches
// the file with inotify and, as soon as another process opens it, exits so that the
// other — blocked in flock — takes the lock. A kubelet and nodelet started with the same two flags replace
// each other this way in both directions, as do two nodelets in a rolling update.
package lockfile
