// Package periodic is the one loop for work done every period until a context ends (garbage collection,
// relists, polls, renewals, log rotation), on an injected clock: Run makes a pass at once and then one every
// period; Every makes its first pass one period after the call. A pass reports its own failures.
//
// It is a leaf helper: it imports no nodelet package.
package periodic
