"""The Python client for the gateway: submit tasks, list and read them, follow their events
live; put files into a session's sandbox and take them out; fetch what a task's tools made.

`AsyncTaskyardClient` writes each request once, as a coroutine (`core.py`, over the I/O of
`io.py`); `TaskyardClient` is the same core run to its end on blocking I/O (`blocking.py`).
A followed stream resumes after a drop by `Last-Event-ID` (`stream.py`). The errors, one
class per reason, are in `errors.py`; the `taskyard` command is `taskyard.client.cli`.
"""

from taskyard.client.blocking import TaskyardClient
from taskyard.client.core import AsyncTaskyardClient
from taskyard.client.errors import (
    ClientError,
    GatewayUnreachable,
    InvalidRequest,
    NotFound,
    ServerError,
    TaskyardError,
    Unauthorized,
)
from taskyard.client.wire import MissedRuns, SessionBusy

__all__ = [
    "AsyncTaskyardClient",
    "ClientError",
    "GatewayUnreachable",
    "InvalidRequest",
    "MissedRuns",
    "NotFound",
    "ServerError",
    "SessionBusy",
    "TaskyardClient",
    "TaskyardError",
    "Unauthorized",
]
