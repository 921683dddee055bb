"""The worker loop of the runtime protocol (docs/runtime.md), with threads.

A Worker claims a queued run with a long poll, renews its lease in the background, carries the
lease (Sessiond-Lease) on every write, releases it when the task is done, and sets the job's
stop event when the run is asked to stop or the lease is lost. Steer commands and approval
decisions aimed at the run reach the task through its Job as they are appended (on_steer,
take_steers, wait_approval).
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any, Callable, Optional

from .client import Client, SessiondError


class Job:
    """A claimed run in a worker's hands.

    claim is what the claim answered (run, lease, attempt); stop is set when a stop command
    reaches the run (reason "stop"), or the lease is lost (reason "lease-lost"): the task should
    then end promptly.
    """

    def __init__(self, client: Client, claim: dict):
        self.client = client
        self.claim = claim
        self.run = claim["run"]
        self.stop = threading.Event()
        self.reason: Optional[str] = None
        self._lease = claim["lease"]
        self._mu = threading.Lock()
        self._changed = threading.Condition(self._mu)
        self._steers: dict[str, dict] = {}
        self._steer_listeners: list[Callable[[dict], None]] = []
        self._decisions: dict[str, str] = {}

    def on_steer(self, listener: Callable[[dict], None]) -> None:
        """Calls listener(steer) as soon as a steer aimed at the run is appended, and at once for
        those that came before and are not taken yet. A steer is {"commandId", "text",
        "receivedAt"} (time.monotonic()). The listener runs on the worker's watch thread: it
        should only hand the steer on (take_steers takes it)."""
        with self._mu:
            self._steer_listeners.append(listener)
            pending = list(self._steers.values())
        for s in pending:
            listener(s)

    def take_steers(self) -> list[dict]:
        """The steers that came and are not taken yet, oldest first; each is taken once."""
        with self._mu:
            out = list(self._steers.values())
            self._steers.clear()
            return out

    def steer_applied(self, steer: dict) -> dict:
        """Appends the steer as "applied" (the run followed the guidance)."""
        return self.append({"eventType": "steer", "payload": {"commandId": steer["commandId"], "targetRunId": self.run["runId"],
                                                             "text": steer["text"], "status": "applied"}})

    def request_approval(self, approval_id: str, tool_call_id: str, tool_name: str, title: str,
                         input: Any = None, description: Optional[str] = None) -> dict:
        """Asks for an approval: the tool call "pending", the approval "requested" and the run's
        status "waiting_approval", in one batch. Wait for the decision with wait_approval."""
        tool = {"toolCallId": tool_call_id, "toolName": tool_name, "status": "pending"}
        if input is not None:
            tool["input"] = input
        approval = {"approvalId": approval_id, "toolCallId": tool_call_id, "status": "requested", "title": title}
        if description:
            approval["description"] = description
        return self.append([{"eventType": "tool", "payload": tool}, {"eventType": "approval", "payload": approval},
                            {"eventType": "status", "sourceMessageId": self.run["sourceMessageId"], "payload": {"status": "waiting_approval"}}])

    def wait_approval(self, approval_id: str, timeout: Optional[float] = None) -> Optional[str]:
        """The decision on approval approval_id ("approved" or "rejected") once a person's
        command is appended (at once if it already was); None when the job is stopped or the
        timeout passes first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while approval_id not in self._decisions:
                if self.stop.is_set():
                    return None
                left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
                if left <= 0:
                    return None
                self._changed.wait(left)
            return self._decisions[approval_id]

    def _observe(self, ev: dict) -> None:
        """The worker's watch hands each event of the session to the job, from the log's start:
        a steer already applied or failed is not taken again; a decision made before is known."""
        if ev.get("runId") != self.run["runId"]:
            return
        p = ev["payload"]
        if ev["eventType"] == "steer":
            with self._mu:
                if p["status"] != "accepted":
                    self._steers.pop(p["commandId"], None)
                    return
                s = {"commandId": p["commandId"], "text": p["text"], "receivedAt": time.monotonic()}
                self._steers[p["commandId"]] = s
                listeners = list(self._steer_listeners)
            for listener in listeners:
                listener(s)
        elif ev["eventType"] == "approval" and p["status"] in ("approved", "rejected"):
            with self._changed:
                self._decisions[p["approvalId"]] = p["status"]
                self._changed.notify_all()

    @property
    def lease(self) -> dict:
        """The lease as last renewed."""
        with self._mu:
            return self._lease

    def _set_lease(self, lease: dict) -> None:
        with self._mu:
            self._lease = lease

    def _abort(self, reason: str) -> None:
        if not self.stop.is_set():
            self.reason = reason
            self.stop.set()
        with self._changed:
            self._changed.notify_all()

    def append(self, events: dict | list[dict], **kw: Any) -> dict:
        """Appends events under the job's lease; events without runId get the run's."""
        batch = events if isinstance(events, list) else [events]
        batch = [{"runId": self.run["runId"], **e} for e in batch]
        return self.client.append(self.run["sessionId"], batch, lease=self.lease["header"], **kw)

    def status(self, status: str, **extra: Any) -> dict:
        """Appends the run's status under the lease ("running", "completed", "stopped", ...)."""
        return self.append({"eventType": "status", "sourceMessageId": self.run["sourceMessageId"],
                            "payload": {"status": status, **extra}})


def _seconds(d: str, default: float) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", d or "")
    if not m:
        return default
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[m.group(2)]


class Worker:
    """Claims runs one at a time and hands each to task(job) until stop() is called.

    When task returns, the lease is released; when it raises, or the lease was lost, the lease
    is left to expire and the server fails or queues the run again.
    """

    def __init__(self, client: Client, task: Callable[[Job], None], agent_id: Optional[str] = None,
                 wait: str = "5s", lease_ttl: str = "30s", on_error: Optional[Callable[[BaseException], None]] = None,
                 **filters: Any):
        self.client = client
        self.task = task
        self.agent_id = agent_id
        self.wait = wait
        self.lease_ttl = lease_ttl
        self.filters = filters
        self.on_error = on_error
        self.stopping = threading.Event()

    def stop(self) -> None:
        """Stops gracefully: no new claims (after the one waiting), the run in hand is finished."""
        self.stopping.set()

    def _report(self, err: BaseException) -> None:
        if self.on_error:
            self.on_error(err)

    def run(self) -> None:
        """Claims and handles runs until stop() is called."""
        backoff = 0.1
        while not self.stopping.is_set():
            try:
                claim = self.client.claim(self.agent_id, wait=self.wait, lease_ttl=self.lease_ttl, **self.filters)
                backoff = 0.1
            except SessiondError as e:
                self._report(e)
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, 10)
                continue
            if claim:
                self._handle(claim)

    def _handle(self, claim: dict) -> None:
        job = Job(self.client, claim)
        ttl = _seconds(self.lease_ttl, 30)
        done = threading.Event()

        def renew() -> None:
            while not done.wait(ttl / 3):
                try:
                    job._set_lease(self.client.renew_lease(job.run, job.lease, self.lease_ttl))
                except SessiondError as e:
                    self._report(e)
                    if e.code == "LEASE_LOST":
                        job._abort("lease-lost")
                        return

        def watch() -> None:
            # A stop command shows in the log as the run's status "stopping".
            try:
                for ev in self.client.follow(job.run["sessionId"], stop=done):
                    if ev["eventType"] == "status" and ev.get("runId") == job.run["runId"] and ev["payload"]["status"] == "stopping":
                        job._abort("stop")
                        return
                    job._observe(ev)
            except SessiondError as e:
                if not done.is_set():
                    self._report(e)

        threads = [threading.Thread(target=renew, daemon=True), threading.Thread(target=watch, daemon=True)]
        for t in threads:
            t.start()
        failed = False
        try:
            self.task(job)
        except Exception as e:  # the task's failure: reported, and the lease left to expire
            failed = True
            self._report(e)
        finally:
            done.set()
        if failed or job.reason == "lease-lost":
            return
        try:
            self.client.release_lease(job.run, job.lease)
        except SessiondError as e:
            if e.code != "LEASE_LOST":  # a run that ended has dropped its lease already
                self._report(e)


__all__ = ["Job", "Worker"]
