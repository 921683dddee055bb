"""The HTTP client of sessiond, with the standard library only.

Sessions, appends (retried with the same keys), reads, the live stream with exact resume,
commands and the worker protocol's claims and leases. The contract's types and the retryable
codes come from sessiond.contract, generated from the server's own tables.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Optional

from .contract import RETRYABLE, AgentSessionCommandResult, AgentSessionEvent


def new_id() -> str:
    """Returns a new random id (for eventId, idempotencyKey, commandId)."""
    return str(uuid.uuid4())


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class SessiondError(Exception):
    """An error answered by sessiond, or a transport failure (code "NETWORK", status 0)."""

    def __init__(self, code: str, message: str, status: int, details: Optional[list] = None,
                 fields: Optional[dict] = None, retry_after: Optional[int] = None):
        problems = "".join(f"; {d.get('path', '')}: {d.get('message', '')}" for d in (details or [])[:5] if isinstance(d, dict))
        super().__init__(f"{code}: {message}{problems}")
        self.code = code
        self.message = message
        self.status = status
        self.details = details or []
        self.fields = fields or {}
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """Whether the same request may be sent again unchanged (the generated table)."""
        return self.code == "NETWORK" or self.code in RETRYABLE


def _decode_error(status: int, body: bytes, retry_after: Optional[str]) -> SessiondError:
    after = int(retry_after) if retry_after and retry_after.isdigit() else None
    try:
        e = json.loads(body)["error"]
        return SessiondError(e["code"], e.get("message", ""), status, e.get("details"), e.get("fields"), after)
    except (ValueError, KeyError, TypeError):
        text = body.decode("utf-8", "replace").strip() or f"HTTP {status}"
        return SessiondError(f"HTTP_{status}", text, status, retry_after=after)


def _session_path(sid: str) -> str:
    return "/v1/sessions/" + urllib.parse.quote(sid, safe="")


def _lease_path(run: dict) -> str:
    return _session_path(run["sessionId"]) + "/runs/" + urllib.parse.quote(run["runId"], safe="") + "/lease"


class Client:
    """A client of one sessiond server.

    Retryable failures (transport errors and the codes of contract.RETRYABLE) are retried up to
    max_retries times with a doubling wait capped at max_backoff seconds, or the server's
    Retry-After when longer; every other code raises SessiondError at once. opener is the
    function that opens a urllib Request (default urllib.request.urlopen), for tests.
    """

    def __init__(self, base_url: str, api_key: Optional[str] = None, max_retries: int = 4,
                 min_backoff: float = 0.1, max_backoff: float = 5.0, timeout: float = 60.0,
                 opener: Optional[Callable[..., Any]] = None):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.max_retries = max_retries
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.timeout = timeout
        self.opener = opener or urllib.request.urlopen

    def _request(self, method: str, path: str, body: Optional[bytes] = None,
                 headers: Optional[dict] = None, timeout: Optional[float] = None) -> Any:
        hdrs = dict(headers or {})
        if self.api_key:
            hdrs["Authorization"] = "Bearer " + self.api_key
        backoff = self.min_backoff
        attempt = 0
        while True:
            req = urllib.request.Request(self.base_url + path, data=body, method=method, headers=hdrs)
            try:
                with self.opener(req, timeout=timeout or self.timeout) as resp:
                    data = resp.read()
                    return json.loads(data) if data and resp.status != 204 else None
            except urllib.error.HTTPError as e:
                data = e.read()
                if "/commands" in path and e.code < 500:
                    try:
                        res = json.loads(data)
                        if isinstance(res, dict) and res.get("contract") == "AgentSessionCommandResult":
                            return res
                    except ValueError:
                        pass
                err = _decode_error(e.code, data, e.headers.get("Retry-After"))
            except (urllib.error.URLError, OSError) as e:
                err = SessiondError("NETWORK", f"{method} {path}: {e} (is the server running at {self.base_url}?)", 0)
            if not err.retryable or attempt >= self.max_retries:
                raise err
            time.sleep(min(max(backoff, err.retry_after or 0), self.max_backoff))
            backoff = min(backoff * 2, self.max_backoff)
            attempt += 1

    def _json(self, method: str, path: str, value: Any, headers: Optional[dict] = None, timeout: Optional[float] = None) -> Any:
        h = {"Content-Type": "application/json", **(headers or {})}
        return self._request(method, path, json.dumps(value).encode(), h, timeout)

    def create_session(self, req: dict) -> dict:
        """Creates a session (POST /v1/sessions): the record's fields and its snapshot."""
        return self._json("POST", "/v1/sessions", req)

    def get_session(self, sid: str) -> dict:
        """Returns a session record."""
        return self._request("GET", _session_path(sid))

    def append(self, sid: str, events: dict | list[dict], expected_sequence: Optional[int] = None,
               lease: Optional[str] = None, multitask: Optional[str] = None) -> dict:
        """Appends one event or a batch, all or nothing.

        Each event lacking them gets a new eventId, the same value as its idempotencyKey,
        occurredAt now and the session's id, once: a retry sends the same keys, so an event the
        server already stored is answered "duplicate". lease is a lease's header value, sent as
        Sessiond-Lease.
        """
        batch = events if isinstance(events, list) else [events]
        now = _now()
        lines = []
        for e in batch:
            eid = e.get("eventId") or new_id()
            full = {"contract": "AgentSessionEvent", "eventId": eid, "sessionId": sid, "sequence": 0,
                    "idempotencyKey": e.get("idempotencyKey") or eid, "occurredAt": now, **e}
            lines.append(json.dumps(full))
        return self.append_ndjson(sid, "\n".join(lines) + "\n", expected_sequence, lease, multitask)

    def append_ndjson(self, sid: str, ndjson: str, expected_sequence: Optional[int] = None,
                      lease: Optional[str] = None, multitask: Optional[str] = None) -> dict:
        """Appends NDJSON text (one complete event per line) as one batch, as given."""
        q = {}
        if expected_sequence is not None:
            q["expectedSequence"] = str(expected_sequence)
        if multitask:
            q["multitask"] = multitask
        path = _session_path(sid) + "/events" + ("?" + urllib.parse.urlencode(q) if q else "")
        headers = {"Content-Type": "application/x-ndjson"}
        if lease:
            headers["Sessiond-Lease"] = lease
        return self._request("POST", path, ndjson.encode(), headers)

    def read_events(self, sid: str, after: int = -1, limit: Optional[int] = None) -> dict:
        """Reads a page of stored events after sequence after: {"events": [...], "lastSequence": N}."""
        q = {"after": str(after)}
        if limit:
            q["limit"] = str(limit)
        return self._request("GET", _session_path(sid) + "/events?" + urllib.parse.urlencode(q))

    def transcript(self, sid: str) -> dict:
        """Returns a session's transcript (GET /v1/sessions/{id}/transcript): the folded state a
        UI draws (messages, reasoning, tools, approvals, steers, usage totals by run, ...)."""
        return self._request("GET", _session_path(sid) + "/transcript")

    def runs(self, sid: str) -> list[dict]:
        """Returns a session's runs with their leases."""
        return self._request("GET", _session_path(sid) + "/runs")["runs"]

    def follow(self, sid: str, after: int = -1, stop: Optional[threading.Event] = None,
               on_reconnect: Optional[Callable[[int, BaseException], None]] = None) -> Iterator[AgentSessionEvent]:
        """Yields a session's events from after, live, each once and in order.

        It reconnects with Last-Event-ID after a dropped connection or a server cut-off, so
        nothing is missed or repeated; it ends when stop is set (checked between events and at
        the server's keep-alives), and raises SessiondError when retrying cannot help.
        """
        cursor = after
        backoff = self.min_backoff
        while not (stop and stop.is_set()):
            headers = {"Accept": "text/event-stream", "Last-Event-ID": str(cursor)}
            if self.api_key:
                headers["Authorization"] = "Bearer " + self.api_key
            req = urllib.request.Request(self.base_url + _session_path(sid) + "/events/stream", headers=headers)
            cause: BaseException
            try:
                with self.opener(req, timeout=self.timeout) as resp:
                    for block in _sse_blocks(resp):
                        if stop and stop.is_set():
                            return
                        name, bid, data = block.get("event"), block.get("id"), block.get("data")
                        if name == "stream.error":
                            raise ConnectionError("stream ended by server: " + (data or ""))
                        if bid is None:
                            continue
                        seq = int(bid)
                        if name and name.startswith("ev.") and data is not None:
                            if seq > cursor:
                                cursor = seq
                                backoff = self.min_backoff
                                yield json.loads(data)
                        else:
                            cursor = max(cursor, seq)
                    cause = ConnectionError("stream closed")
            except urllib.error.HTTPError as e:
                err = _decode_error(e.code, e.read(), e.headers.get("Retry-After"))
                if not err.retryable:
                    raise err
                cause = err
            except (urllib.error.URLError, OSError) as e:
                cause = e
            if on_reconnect:
                on_reconnect(cursor, cause)
            if stop:
                if stop.wait(backoff):
                    return
            else:
                time.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff)

    def command(self, sid: str, cmd: dict, wait: Optional[str] = None) -> AgentSessionCommandResult:
        """Sends a command and returns its result; a refusal is a result (outcome "rejected").

        Fields left out are filled: a new commandId and idempotencyKey, issuedAt now, and
        expectedSequence the log's current last sequence. wait ("10s") is for a stop to wait
        for its confirmation.
        """
        cid = cmd.get("commandId") or new_id()
        expected = cmd.get("expectedSequence")
        if expected is None:
            expected = self.read_events(sid, limit=1)["lastSequence"]
        full = {"contract": "AgentSessionCommand", "commandId": cid, "sessionId": sid,
                "idempotencyKey": cmd.get("idempotencyKey") or cid, "expectedSequence": expected,
                "issuedAt": _now(), **cmd}
        path = _session_path(sid) + "/commands" + ("?wait=" + urllib.parse.quote(wait) if wait else "")
        return self._json("POST", path, full)

    def stop(self, sid: str, run_id: str, reason: Optional[str] = None, wait: Optional[str] = None) -> AgentSessionCommandResult:
        """Asks a run to stop."""
        return self.command(sid, {"commandType": "stop", "runId": run_id, "payload": {"reason": reason} if reason else {}}, wait)

    def steer(self, sid: str, run_id: str, text: str) -> AgentSessionCommandResult:
        """Steers a running run with text."""
        return self.command(sid, {"commandType": "steer", "runId": run_id, "payload": {"targetRunId": run_id, "text": text}})

    def approve(self, sid: str, run_id: str, approval_id: str, reason: Optional[str] = None) -> AgentSessionCommandResult:
        """Approves a pending approval of run run_id."""
        return self._approval(sid, run_id, approval_id, "approved", reason)

    def reject(self, sid: str, run_id: str, approval_id: str, reason: Optional[str] = None) -> AgentSessionCommandResult:
        """Rejects a pending approval of run run_id."""
        return self._approval(sid, run_id, approval_id, "rejected", reason)

    def _approval(self, sid: str, run_id: str, approval_id: str, decision: str, reason: Optional[str]) -> AgentSessionCommandResult:
        payload = {"approvalId": approval_id, "decision": decision}
        if reason:
            payload["reason"] = reason
        return self.command(sid, {"commandType": "approval", "runId": run_id, "payload": payload})

    def claim(self, agent_id: Optional[str] = None, wait: str = "30s", lease_ttl: str = "30s", **filters: Any) -> Optional[dict]:
        """Claims the oldest queued run matching the filter, waiting up to wait; None when none came."""
        req = {"wait": wait, "leaseTtl": lease_ttl, **filters}
        if agent_id:
            req["agent_id"] = agent_id
        return self._json("POST", "/v1/runs/claim", req, timeout=self.timeout + 35)

    def renew_lease(self, run: dict, lease: dict, lease_ttl: Optional[str] = None) -> dict:
        """Renews a lease; LEASE_LOST means the run is no longer yours."""
        req = {"leaseId": lease["leaseId"], "token": lease["token"]}
        if lease_ttl:
            req["leaseTtl"] = lease_ttl
        return self._json("POST", _lease_path(run), req)

    def release_lease(self, run: dict, lease: dict) -> None:
        """Gives a lease up."""
        self._json("POST", _lease_path(run) + "/release", {"leaseId": lease["leaseId"], "token": lease["token"]})


def _sse_blocks(resp: Any) -> Iterator[dict]:
    """Splits a text/event-stream body into blocks; a block cut off by the end is dropped."""
    block: dict = {}
    while True:
        raw = resp.readline()
        if not raw:
            return
        if not raw.endswith(b"\n"):
            return  # a cut line: the block is incomplete
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if block:
                yield block
            block = {}
        elif line.startswith(":"):
            yield {}  # a keep-alive: lets follow check its stop event
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data" and "data" in block:
                block["data"] += "\n" + value
            elif field in ("id", "event", "data"):
                block[field] = value
