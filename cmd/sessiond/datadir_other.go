//go:build !unix

package main

// lockHolder cannot tell on this platform, which has no flock(2) (the SQLite store refuses
// to open there).
func lockHolder(dir string) (pid string, locked bool) { return "", false }
