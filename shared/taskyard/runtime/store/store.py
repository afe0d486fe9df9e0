"""`TaskStore`: the store's parts on one client, for the services that use most of them.

Each part is a class of its own, with its scripts beside it: `Tasks` (tasks, events, the
session's hand-over: `tasks.py`), `Steps` (`steps.py`), `ToolCalls` (results and claims:
`tool_calls.py`), `Approvals` (`approvals.py`) and `SweepIndex` (`sweep_index.py`); the
tool workers' sandbox records, schedules and session views are modules that take a store.
Every part stands on `ScriptedStore` (`base.py`: the client, the databases, the scripts), so
a caller that needs one part can be handed that part alone (`Steps.from_url(...)`). The
facade stays because each service holds one connection pool and nearly every caller (a step,
the sweep, the gateway's routes, the tool worker) uses three parts or more.
"""

from __future__ import annotations

from taskyard.runtime.store.approvals import Approvals
from taskyard.runtime.store.steps import Steps
from taskyard.runtime.store.sweep_index import SweepIndex
from taskyard.runtime.store.tasks import Tasks
from taskyard.runtime.store.tool_calls import ToolCalls

__all__ = ["TaskStore"]


class TaskStore(Tasks, Steps, ToolCalls, Approvals, SweepIndex):
    """Every part of the store on one client (see the module's docstring)."""
