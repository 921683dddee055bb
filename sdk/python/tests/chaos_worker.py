"""The worker the chaos test of sdk/chaos_test.go runs as a real python process, killed and
paused at random: it claims the runs of an agent with 1 s leases and writes each run's work as 8
messages, 100 ms apart, whose event ids name the fencing token they are written under
("w-<runId>-t<token>-<i>"), then completes the run. It prints "busy" on its standard output when
it starts a run and "idle" when it is done with it, for the test to pick its victims. Arguments:
the server's URL, the agent.
"""

import os
import signal
import sys
import time
from datetime import datetime, timezone

from sessiond import Client, Worker


def now():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def main():
    url, agent = sys.argv[1], sys.argv[2]
    client = Client(url, min_backoff=0.02, max_backoff=0.4, max_retries=8, timeout=10)

    def task(job):
        print("busy", flush=True)
        started = time.monotonic()
        token = job.lease["token"]
        run_id = job.run["runId"]

        def eid(i):
            return f"w-{run_id}-t{token}-{i}"

        job.append({"eventId": eid(0), "eventType": "status", "sourceMessageId": job.run["sourceMessageId"],
                    "payload": {"status": "running", "startedAt": now()}})
        for i in range(1, 9):
            if job.stop.wait(0.1):
                print("idle", flush=True)
                return  # a lost lease: write nothing more
            job.append({"eventId": eid(i), "eventType": "message", "payload": {
                "messageId": f"reply-{run_id}", "role": "assistant", "operation": "append",
                "parts": [{"type": "text", "text": f"{i} "}], "status": "streaming"}})
        job.append({"eventId": eid(9), "eventType": "status", "sourceMessageId": job.run["sourceMessageId"],
                    "payload": {"status": "completed", "completedAt": now(),
                                "durationMs": int((time.monotonic() - started) * 1000)}})
        print("idle", flush=True)

    def report(e):
        print(f"worker {os.getpid()}: {e}", file=sys.stderr, flush=True)

    worker = Worker(client, task, agent_id=agent, wait="1s", lease_ttl="1s", on_error=report)
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    worker.run()


if __name__ == "__main__":
    main()
