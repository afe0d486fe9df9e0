"""Structured logs: one JSON object per line, carrying task and session ids where known."""

from __future__ import annotations

import json
import logging
import sys
import time

__all__ = ["setup_logging"]

_CONTEXT_FIELDS = ("task_id", "session_id", "step", "tool", "call_id", "tenant")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": round(time.time(), 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: getattr(record, k) for k in _CONTEXT_FIELDS if hasattr(record, k)})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def setup_logging(level: str = "INFO") -> None:
    """JSON lines on stderr for every taskyard logger."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("taskyard")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
