//go:build !linux

package sqlite

// freeSpace returns -1: the free space of dir's file system is not looked up on this
// platform, and readiness after a full disk rests on its probe write alone (readiness.go).
func freeSpace(dir string) int64 { return -1 }
