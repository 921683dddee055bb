package server

import (
	"fmt"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
)

// The remedies of the domain's refusals (session.Remedy) in the HTTP API's terms: the routes
// to call and the sessiond commands that call them. The domain says what a client can do; only
// this edge names how.

// serverChanges says how each mechanism of the server that changes a record status is set
// off, for a PATCH refusal to name it.
var serverChanges = map[string]string{
	contract.BySweeper:   "the sweeper, when heartbeats stop",
	contract.ByHeartbeat: "a heartbeat or an append: POST /v1/sessions/{id}/heartbeat",
	contract.ByArchive:   "archive: POST /v1/sessions/{id}/archive",
	contract.ByRestore:   "restore: POST /v1/archives/restore with the session's latest archive",
}

// remedyText words r for the API's message about session sid: "; " and what to do, or "" for
// no remedy.
func remedyText(sid string, r session.Remedy) string {
	var how string
	switch r.Kind {
	case session.EnableCapability:
		how = fmt.Sprintf("if the runtime supports it, turn it on with PATCH /v1/sessions/%s {\"snapshot\":…} (sessiond patch --enable %s %s), then send the command again", sid, r.Capability, sid)
	case session.NotLive:
		switch r.Status {
		case contract.SessionStatusArchived:
			how = "restore it first (sessiond session restore ARCHIVE-NAME, or POST /v1/archives/restore): it comes back paused"
		case contract.SessionStatusClosed:
			how = "a closed session stays closed; create a new session to go on"
		}
	case session.ServerTransition:
		how = fmt.Sprintf("%s → %s is made by the server, through %s (docs/lifecycle.md)", r.From, r.To, serverChanges[r.By])
	case session.RestoreArchive:
		how = fmt.Sprintf("restore it first (sessiond session restore %s, or POST /v1/archives/restore {\"name\":%q})", r.Archive, r.Archive)
	}
	if how == "" {
		return ""
	}
	if r.Then != "" {
		how += ", " + r.Then
	}
	return "; " + how
}

// withRemedy adds the remedy of the refusal of a command of commandType
// (session.CommandRemedy) to the message of its result's error, for session sid.
func withRemedy(sid, commandType string, res *contract.CommandResult) {
	if res != nil && res.Error != nil {
		res.Error.Message += remedyText(sid, session.CommandRemedy(commandType, res.Error))
	}
}
