//go:build !unix

package acp

import "os"

// signalName names the signal that ended a process.
func signalName(*os.ProcessState) string { return "killed" }
