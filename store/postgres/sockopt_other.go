//go:build !linux

package postgres

import "syscall"

// setUserTimeout does nothing outside Linux: TCP_USER_TIMEOUT is Linux's; keepalive still
// applies.
func setUserTimeout(string, string, syscall.RawConn) error { return nil }
