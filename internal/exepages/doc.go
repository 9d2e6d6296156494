// Package exepages gives back to the kernel the pages of the running executable that start-up read and
// the process no longer uses. A Go binary's package initializers fault in most of its code and read-only
// data (client-go's scheme alone reads every API type's descriptors), and each fault maps the 64 KiB
// around it; after start-up a node agent uses a fraction of those pages. Release drops them from the
// process and from the page cache (MADV_PAGEOUT) and marks the read-only data random-access (MADV_RANDOM),
// so that what the process reads again comes back a page at a time rather than with its neighbours. Pages
// written to (a debugger's breakpoints, uprobes) are never lost: the kernel writes out or keeps what it
// cannot drop.
//
// It is a leaf helper: it imports no nodelet package.
package exepages
