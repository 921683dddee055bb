package contract_test

import (
	"errors"
	"testing"

	"github.com/sessiond/sessiond/contract"
)

func TestCheckNewRun(t *testing.T) {
	running := &contract.Run{RunID: "r1", Status: contract.RunStatusRunning}
	for _, tc := range []struct {
		name    string
		active  *contract.Run
		f       contract.RunStatusFields
		enqueue bool
		refused bool
	}{
		{"no active run", nil, contract.RunStatusFields{RunID: "r2", Status: "running"}, false, false},
		{"the active run itself", running, contract.RunStatusFields{RunID: "r1", Status: "running"}, false, false},
		{"another run, queued", running, contract.RunStatusFields{RunID: "r2", Status: "queued"}, false, true},
		{"another run, queued, enqueue", running, contract.RunStatusFields{RunID: "r2", Status: "queued"}, true, false},
		{"another run, running, enqueue", running, contract.RunStatusFields{RunID: "r2", Status: "running"}, true, true},
		{"another run, failed, enqueue", running, contract.RunStatusFields{RunID: "r2", Status: "failed"}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := contract.CheckNewRun(tc.active, tc.f, tc.enqueue)
			var ae *contract.ActiveRunError
			if got := errors.As(err, &ae); got != tc.refused {
				t.Fatalf("CheckNewRun = %v, refused %v, want %v", err, got, tc.refused)
			}
			if tc.refused && (ae.RunID != tc.f.RunID || ae.Status != tc.f.Status || ae.ActiveRunID != "r1" || ae.ActiveStatus != "running") {
				t.Errorf("the error names %+v", ae)
			}
		})
	}
}

func TestCurrentRun(t *testing.T) {
	run := func(id, status string) contract.Run { return contract.Run{RunID: id, Status: status} }
	for _, tc := range []struct {
		name string
		runs []contract.Run
		want string
	}{
		{"none", nil, ""},
		{"one", []contract.Run{run("r1", "completed")}, "r1"},
		{"the latest when all ended", []contract.Run{run("r1", "completed"), run("r2", "failed")}, "r2"},
		{"the active one", []contract.Run{run("r1", "completed"), run("r2", "running")}, "r2"},
		{"the earliest active, not the one enqueued behind it", []contract.Run{run("r1", "completed"), run("r2", "waiting_approval"), run("r3", "queued")}, "r2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := contract.CurrentRun(tc.runs)
			if (got == nil && tc.want != "") || (got != nil && got.RunID != tc.want) {
				t.Errorf("CurrentRun = %+v, want %q", got, tc.want)
			}
		})
	}
}
