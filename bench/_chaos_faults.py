"""The chaos itself: a thread that SIGKILLs and restarts the agent and tool workers at random
every few seconds, and restarts Redis once (SHUTDOWN, or SIGKILL), or under Sentinel SIGKILLs
the primary once and starts it again after the replica's promotion (it returns as the new
master's replica), with LocalStack's helpers.

A kill is `LocalStack.kill` (SIGKILL of the service's process group, as a crash); the
restart is the same command line, waited on until the worker logs that it is ready.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

import redis

from devstack.stack import LocalStack

__all__ = ["REDIS_DOWN_S", "Chaos", "FaultLog"]

WORKERS = ("agent_worker", "tool_worker")
REDIS_DOWN_S = 1.0  # how long Redis stays down before it is started again


@dataclass
class FaultLog:
    """What the chaos did: when each worker was killed (Unix times, as the services' logs
    write them), the seconds each restart took, the Redis fault."""

    kills: dict[str, list[float]] = field(default_factory=lambda: {w: [] for w in WORKERS})
    restart_s: list[float] = field(default_factory=list)
    redis: str = ""


class Chaos:
    """Started with `start()`, ended with `stop()`, which returns the log (or raises what
    broke the chaos thread: a service that would not come back is the run's failure);
    `halt()` only ends it, for a run that is failing anyway."""

    def __init__(
        self,
        stack: LocalStack,
        rng: random.Random,
        pause_s: tuple[float, float],
        redis_fault: str | None = None,
        redis_at_s: float = 0.0,
    ) -> None:
        self.stack = stack
        self.rng = rng
        self.pause_s = pause_s
        self.redis_fault = redis_fault  # None, "shutdown", "sigkill" or "failover"
        self.redis_at_s = redis_at_s  # seconds after start()
        self.log = FaultLog()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos", daemon=True)
        self._error: BaseException | None = None

    def start(self) -> None:
        self._began = time.monotonic()
        self._thread.start()

    def stop(self) -> FaultLog:
        self.halt()
        if self._error is not None:
            raise RuntimeError("the chaos thread failed") from self._error
        return self.log

    def halt(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.rng.uniform(*self.pause_s)):
                if self.redis_fault and time.monotonic() - self._began >= self.redis_at_s:
                    self._restart_redis(self.redis_fault)
                    self.redis_fault = None
                else:
                    self._kill_worker(self.rng.choice(WORKERS))
        except BaseException as exc:  # handed to stop(), which raises it in the main thread
            self._error = exc

    def _kill_worker(self, name: str) -> None:
        self.log.kills[name].append(time.time())
        self.stack.kill(name)
        began = time.monotonic()
        self.stack.restart(name)
        self.log.restart_s.append(time.monotonic() - began)

    def _restart_redis(self, kind: str) -> None:
        at = time.monotonic() - self._began
        if kind == "failover":
            self._fail_over(at)
            return
        if kind == "shutdown":
            client = redis.Redis.from_url(self.stack.redis_url)
            client.shutdown()  # writes and fsyncs the AOF, then exits
            client.close()
            self.stack.procs.pop("redis").wait(timeout_s=60)
        else:
            self.stack.kill("redis")
        time.sleep(REDIS_DOWN_S)
        self.stack.restart("redis")  # waits until it answers (its AOF loaded)
        down = time.monotonic() - self._began - at
        self.log.redis = f"{kind.upper()} at {at:.1f} s, answering again {down:.1f} s later"

    def _fail_over(self, at: float) -> None:
        """SIGKILL the primary; once the sentinels have promoted the replica, start the old
        primary again (it comes back as the new master's replica)."""
        sentinels = self.stack.sentinels
        assert sentinels is not None, "the failover variant runs on LocalStack(redis_sentinel=True)"
        killed = time.monotonic()
        self.stack.kill("redis")
        sentinels.wait_promoted(self.stack.ports.redis)
        promoted = time.monotonic() - killed
        self.stack.restart("redis")
        sentinels.wait_replica_online()
        replicated = time.monotonic() - killed
        self.log.redis = (
            f"primary SIGKILLed at {at:.1f} s, replica promoted {promoted:.1f} s later, "
            f"a replica online again (the old primary) {replicated:.1f} s after the kill"
        )
