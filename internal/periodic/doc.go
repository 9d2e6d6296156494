// Package periodic runs a node's periodic housekeeping (image and container garbage collection): once the
// runtime answers, a pass at once and then one every period on an injected clock, until the context ends.
package periodic
