"""One settings class per process kind, each the union of the areas it reads, so a service
validates (and holds) only its own settings: the gateway no sandbox limit, the tool worker no
tenant-token secret. Celery beat runs the agent worker's module, so it reads the agent
worker's class. The proxy has its own (`services.llm_proxy.settings`)."""

from __future__ import annotations

from functools import lru_cache
from typing import TypeVar

from taskyard.plumbing.settings.areas import (
    AcceptSettings,
    AgentRunSettings,
    Area,
    BrokerSettings,
    GatewayAreaSettings,
    MetricsSettings,
    ModelSettings,
    OtlpSettings,
    PluginSettings,
    ScheduleSettings,
    SweepSettings,
    TaskSettings,
    TenantTokenSettings,
    WebhookSettings,
)
from taskyard.plumbing.settings.tools import (
    ArtifactSettings,
    FileSettings,
    McpListingSettings,
    McpSettings,
    SandboxSettings,
    WebSettings,
)

__all__ = [
    "AgentWorkerSettings",
    "GatewaySettings",
    "SubmissionSettings",
    "ToolWorkerSettings",
    "get_settings",
]

S = TypeVar("S", bound=Area)


class SubmissionSettings(TaskSettings, AcceptSettings, WebhookSettings, SweepSettings):
    """What a task's way in reads (`taskyard.runtime.submission`): the gateway's and the
    schedules' (a task is stored with the `stall_s` the sweep re-drives it after)."""


class GatewaySettings(
    GatewayAreaSettings,
    SubmissionSettings,
    BrokerSettings,
    ModelSettings,  # the agent cards describe the agents they build
    ScheduleSettings,
    FileSettings,
    ArtifactSettings,
    PluginSettings,
    OtlpSettings,
):
    """The gateway's settings."""


class AgentWorkerSettings(
    SubmissionSettings,  # the schedules' tick submits tasks
    BrokerSettings,
    ModelSettings,
    TenantTokenSettings,
    AgentRunSettings,
    SweepSettings,
    ScheduleSettings,
    McpListingSettings,
    PluginSettings,
    MetricsSettings,
    OtlpSettings,
):
    """The agent worker's settings, and Celery beat's (it runs the same module)."""


class ToolWorkerSettings(
    BrokerSettings,
    SweepSettings,  # a call's claim outlives a stalled task's re-drive (`stall_s`)
    SandboxSettings,
    WebSettings,
    McpSettings,
    FileSettings,
    ArtifactSettings,
    PluginSettings,
    MetricsSettings,
    OtlpSettings,
):
    """The tool worker's settings."""


@lru_cache
def _read(cls: type[Area]) -> Area:
    return cls()


def get_settings(cls: type[S]) -> S:
    """The process's settings of class `cls`, read once from the environment (a test that
    changes the environment builds its own instead)."""
    settings = _read(cls)
    assert isinstance(settings, cls)
    return settings
