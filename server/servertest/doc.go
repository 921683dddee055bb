// Package servertest starts real sessiond servers for tests in other packages: a server on a
// fresh SQLite store in the test's temporary directory, served over loopback HTTP and stopped,
// with its store, when the test ends.
package servertest
