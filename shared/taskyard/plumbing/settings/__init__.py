"""Settings: environment variables with the prefix ``TASKYARD_``, grouped by area and composed
into one class per service.

- `checks`: the parsers and checks the areas share (names, URLs, lists, secrets).
- `areas`, `tools`: the areas, one pydantic-settings class each, with their defaults and
  checks; a field's docstring is its documentation.
- `services`: `GatewaySettings`, `AgentWorkerSettings`, `ToolWorkerSettings`, and
  `get_settings(cls)`, the process's settings of a class, read once.
- `table`: the README's configuration table, rendered from the classes.

Code that takes settings is typed with the narrowest area it reads (`make_celery` takes a
`BrokerSettings`), so any service class that holds that area will do.
"""

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
    RedisSentinelSettings,
    RedisSettings,
    ScheduleSettings,
    SweepSettings,
    TaskSettings,
    TenantTokenSettings,
    WebhookSettings,
)
from taskyard.plumbing.settings.checks import (
    HTTP_SCHEMES,
    REDIS_SCHEMES,
    broker_database,
    check_token_secret,
    check_url,
    env_name,
    items,
    parse_api_keys,
    parse_credentials,
    parse_sentinels,
)
from taskyard.plumbing.settings.services import (
    AgentWorkerSettings,
    GatewaySettings,
    SubmissionSettings,
    ToolWorkerSettings,
    get_settings,
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
    "HTTP_SCHEMES",
    "REDIS_SCHEMES",
    "AcceptSettings",
    "AgentRunSettings",
    "AgentWorkerSettings",
    "Area",
    "ArtifactSettings",
    "BrokerSettings",
    "FileSettings",
    "GatewayAreaSettings",
    "GatewaySettings",
    "McpListingSettings",
    "McpSettings",
    "MetricsSettings",
    "ModelSettings",
    "OtlpSettings",
    "PluginSettings",
    "RedisSentinelSettings",
    "RedisSettings",
    "SandboxSettings",
    "ScheduleSettings",
    "SubmissionSettings",
    "SweepSettings",
    "TaskSettings",
    "TenantTokenSettings",
    "ToolWorkerSettings",
    "WebSettings",
    "WebhookSettings",
    "broker_database",
    "check_token_secret",
    "check_url",
    "env_name",
    "get_settings",
    "items",
    "parse_api_keys",
    "parse_credentials",
    "parse_sentinels",
]
