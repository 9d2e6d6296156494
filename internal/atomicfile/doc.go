// Package atomicfile writes a file whole or not at all: the content goes to a temporary file in the same
// directory, is synced, and is renamed over the file, so a crash or a full disk leaves either the old file
// or the new one, never a torn one. The agent's state files (checkpoints, records) are written with it.
//
// It is a leaf helper: it imports no nodelet package.
package atomicfile
