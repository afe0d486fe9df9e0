"""Start a proxy as a subprocess, for tests and benchmarks of this and other services."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from types import TracebackType

__all__ = ["ProxyProcess"]

_READY_PREFIX = "listening on "


class ProxyProcess:
    """`python -m services.llm_proxy` on a free port; use as a context manager.

    `env` adds TASKYARD_* settings (e.g. ``{"TASKYARD_PROXY_MAX_RETRIES": "1"}``) on top of
    this process's environment.
    """

    def __init__(
        self,
        upstreams: str | None = None,
        *,
        pool_file: str | None = None,
        policy: str | None = None,
        env: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self._command = [sys.executable, "-m", "services.llm_proxy", "--host", host, "--port", "0"]
        for flag, value in (
            ("--upstreams", upstreams),
            ("--pool-file", pool_file),
            ("--policy", policy),
        ):
            if value is not None:
                self._command += [flag, value]
        self._env = {**os.environ, **(env or {})}
        self._process: subprocess.Popen[str] | None = None
        self.url = ""

    @property
    def base_url(self) -> str:
        """The OpenAI base URL clients use (``.../v1``)."""
        return f"{self.url}/v1"

    def start(self) -> ProxyProcess:
        """Start the proxy and wait until it listens."""
        self._process = subprocess.Popen(
            self._command, env=self._env, stdout=subprocess.PIPE, text=True
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line.startswith(_READY_PREFIX):
            self.stop()
            raise RuntimeError(f"the proxy did not start: {line!r}")
        self.url = line[len(_READY_PREFIX) :].strip()
        return self

    def stop(self) -> None:
        """Terminate the proxy (it flushes usage to Redis on the way out) and wait for it."""
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._process = None

    def __enter__(self) -> ProxyProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
