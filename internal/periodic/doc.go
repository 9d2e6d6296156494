// Package periodic is the one loop for work done every period until a context ends (garbage collection,
// relists, polls, renewals, log rotation), on an injected clock: Run makes a pass at once and then one every
// period; RunTriggered as Run, with passes asked for early; Every makes its first pass one period after the
// call; Until polls a condition until it holds or a timeout passes. A pass reports its own failures.
//
// It is a leaf helper: it imports no nodelet package.
package periodic
