// The command policy table, as the server applies it (served from contract.PolicyOf at
// /ui/policy.json): a control is offered only when the session's snapshot has the command's
// capability and the run's status is one the command is allowed in.
import { getJSON } from "./api.js";

let table = null;

// loadPolicy fetches the table once.
export async function loadPolicy() {
  if (!table) table = await getJSON("/ui/policy.json");
  return table;
}

// hasCapability applies the snapshot's flag or, when absent, its default.
export function hasCapability(snapshot, name) {
  const caps = (snapshot && snapshot.capabilities) || {};
  if (typeof caps[name] === "boolean") return caps[name];
  return !!(table && table.capabilityDefaults[name]);
}

// allowed says whether commandType may be sent to a session with this snapshot while its run
// (current or target) has runStatus ("idle" when there is no run), and if not, why.
export function allowed(commandType, snapshot, runStatus) {
  const row = table && table.commands[commandType];
  if (!row) return { ok: false, why: `unknown command ${commandType}` };
  if (row.capability && !hasCapability(snapshot, row.capability)) {
    return { ok: false, why: `the session's snapshot lacks the ${row.capability} capability` };
  }
  if (row.allowedStatuses && !row.allowedStatuses.includes(runStatus)) {
    return { ok: false, why: `allowed when the run is ${row.allowedStatuses.join(", ")}; it is ${runStatus}` };
  }
  return { ok: true, why: "" };
}

export const isTerminal = (status) => !!(table && table.terminalStatuses.includes(status));
