"""An example agent runtime in Python: a sessiond worker running a scripted agent.

For every queued run of its agent it thinks (a reasoning block), calls two tools (weather and
clock), then streams an answer slowly, word by word, so a person has time to steer it or stop
it from the web UI (or with sessiond cmd steer / stop): a steer is applied between two words
(the steer appended "applied", and the answer says so), a stop ends the run "stopped". All of
it is appended under the run's lease with the standard-library SDK in sdk/python.

Run it with PYTHONPATH=sdk/python, SESSIOND_URL (default http://127.0.0.1:7420), AGENT (default
python-example) and WORD_MS (default 150); sdk/examples_test.go runs it against the real server.
"""

import os
import signal
import sys
import time
from datetime import datetime, timezone

from sessiond import Client, Job, Worker


def now():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


TOOLS = {
    "weather": lambda args: {"city": args["city"], "sky": "sunny", "celsius": 21},
    "clock": lambda args: {"zone": args["zone"], "time": time.strftime("%H:%M", time.gmtime())},
}

ANSWER = ("It is sunny and 21 °C in Paris; the clocks there say it is daytime, a fine time for a walk "
          "along the river before dinner.").split(" ")


def run_agent(job: Job, word_s: float) -> None:
    """The scripted agent: one run, recorded into its session."""
    started = time.monotonic()
    rid = job.run["runId"]

    def elapsed():
        return int((time.monotonic() - started) * 1000)

    job.status("running", startedAt=now())
    job.append({"eventType": "reasoning", "payload": {"reasoningId": f"{rid}-r", "text": "Look up the weather and the time, then answer.", "status": "completed"}})
    for name, args in (("weather", {"city": "Paris"}), ("clock", {"zone": "Europe/Paris"})):
        call = f"{rid}-{name}"
        job.append({"eventType": "tool", "payload": {"toolCallId": call, "toolName": name, "status": "running", "input": args, "startedAt": now()}})
        job.append({"eventType": "tool", "payload": {"toolCallId": call, "toolName": name, "status": "completed", "output": TOOLS[name](args), "completedAt": now()}})
    job.append({"eventType": "usage", "payload": {"inputTokens": 20, "outputTokens": 8, "totalTokens": 28}})
    answer = f"{rid}-answer"
    for i, word in enumerate(ANSWER):
        if job.stop.wait(word_s):
            if job.reason == "stop":
                job.append({"eventType": "message", "payload": {"messageId": answer, "role": "assistant", "operation": "append", "parts": [], "status": "failed"}})
                job.status("stopped", stoppedAt=now(), durationMs=elapsed())
            return  # a lost lease: the run is no longer ours to write
        parts = [{"type": "text", "text": (" " if i else "") + word}]
        for steer in job.take_steers():
            job.steer_applied(steer)
            parts.append({"type": "text", "text": f" (steered: {steer['text']})"})
        job.append({"eventType": "message", "payload": {"messageId": answer, "role": "assistant", "operation": "append", "parts": parts, "status": "streaming"}})
    job.append([{"eventType": "message", "payload": {"messageId": answer, "role": "assistant", "operation": "append", "parts": [], "status": "completed"}},
                {"eventType": "usage", "payload": {"inputTokens": 40, "outputTokens": len(ANSWER), "totalTokens": 40 + len(ANSWER)}}])
    job.status("completed", completedAt=now(), durationMs=elapsed())


def main() -> None:
    server = os.environ.get("SESSIOND_URL", "http://127.0.0.1:7420")
    agent = os.environ.get("AGENT", "python-example")
    word_s = int(os.environ.get("WORD_MS", "150")) / 1000

    def task(job: Job) -> None:
        print(f"run {job.run['runId']} of {job.run['sessionId']}: started", flush=True)
        run_agent(job, word_s)
        print(f"run {job.run['runId']} of {job.run['sessionId']}: {job.reason or 'completed'}", flush=True)

    worker = Worker(Client(server), task, agent_id=agent, wait="10s", lease_ttl="10s",
                    on_error=lambda e: print(f"worker: {e}", file=sys.stderr, flush=True))
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    print(f"python-example: serving agent {agent} at {server}", flush=True)
    try:
        worker.run()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
