"""A warm pool: kernels started ahead of time, so a new session skips the start-up wait."""

from __future__ import annotations

import logging
import threading

from shared.sandbox.channel import KernelChannel, StartKernel

__all__ = ["WarmPool"]

log = logging.getLogger(__name__)


class WarmPool:
    """Keeps up to `size` started kernels; a background thread refills it after each take."""

    def __init__(self, start: StartKernel, size: int) -> None:
        self._start = start
        self._size = size
        self._ready: list[KernelChannel] = []
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._closed = False
        self._filler: threading.Thread | None = None
        if size > 0:
            self._filler = threading.Thread(target=self._fill, name="sandbox-pool", daemon=True)
            self._filler.start()
            self._wanted.set()

    def __len__(self) -> int:
        return len(self._ready)

    def take(self, session_key: str) -> KernelChannel:
        """A started kernel: a warm one if there is one, else one started now."""
        with self._lock:
            channel = self._ready.pop() if self._ready else None
        self._wanted.set()
        if channel is not None and channel.alive():
            return channel
        if channel is not None:
            channel.close()
        return self._start(session_key)

    def close(self) -> None:
        """Stop refilling and stop every warm kernel."""
        with self._lock:
            self._closed = True
            ready, self._ready = self._ready, []
        self._wanted.set()
        if self._filler is not None:
            self._filler.join()
        for channel in ready:
            channel.close()

    def _fill(self) -> None:
        while self._wanted.wait():
            self._wanted.clear()
            while self._needs_one():
                try:
                    channel = self._start(None)
                except Exception:
                    # A failing engine must not kill the pool; sessions then start their own.
                    log.exception("warm pool: could not start a kernel")
                    break
                self._keep(channel)
            if self._closed:
                return

    def _needs_one(self) -> bool:
        with self._lock:
            return not self._closed and len(self._ready) < self._size

    def _keep(self, channel: KernelChannel) -> None:
        with self._lock:
            if not self._closed:
                self._ready.append(channel)
                return
        channel.close()
