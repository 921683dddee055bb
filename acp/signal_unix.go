//go:build unix

package acp

import (
	"os"
	"syscall"
)

// signalName names the signal that ended a process.
func signalName(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return "killed"
}
