"""docs/configuration.md's tables are the settings classes' own, and each service's class
holds only the areas it reads."""

from __future__ import annotations

import pytest

from scripts.settings_table import PAGE, SERVICES, page_tables, with_tables
from taskyard.plumbing.settings import (
    Area,
    ArtifactSettings,
    BrokerSettings,
    FileSettings,
    GatewayAreaSettings,
    McpSettings,
    SandboxSettings,
    TenantTokenSettings,
    WebSettings,
    areas,
    tools,
)
from taskyard.plumbing.settings.table import areas_of, markdown


def _fields(area: type[Area]) -> set[str]:
    return set(area.model_fields)


def _own(area: type[Area]) -> set[str]:
    """The fields `area` declares itself, not those of the areas it builds on."""
    return set(vars(area).get("__annotations__", {}))


def test_the_configuration_page_shows_the_generated_tables() -> None:
    assert page_tables(PAGE.read_text()).strip() == markdown(SERVICES).strip(), (
        "run: python -m scripts.settings_table --write"
    )


def test_every_setting_has_a_row_with_a_description() -> None:
    tables = markdown(SERVICES)
    for cls in SERVICES.values():
        for name, field in cls.model_fields.items():
            assert f"| `TASKYARD_{name.upper()}` |" in tables
            assert field.description, f"{cls.__name__}.{name} has no docstring"


def test_every_shared_area_is_read_by_a_service() -> None:
    shown = set(areas_of(SERVICES))
    shared = {
        c
        for m in (areas, tools)
        for c in vars(m).values()
        if isinstance(c, type) and issubclass(c, Area) and c.__module__ == m.__name__
    }
    unread = {area.__name__ for area in shared if _own(area) and area not in shown}
    assert unread == set()


@pytest.mark.parametrize(
    ("service", "not_read"),
    [
        ("gateway", [SandboxSettings, WebSettings, McpSettings, TenantTokenSettings]),
        ("agent worker", [SandboxSettings, WebSettings, GatewayAreaSettings, FileSettings]),
        ("agent worker", [ArtifactSettings]),
        ("tool worker", [TenantTokenSettings, GatewayAreaSettings]),
        ("proxy", [BrokerSettings, SandboxSettings, GatewayAreaSettings, FileSettings]),
    ],
)
def test_a_service_validates_only_its_areas(service: str, not_read: list[type[Area]]) -> None:
    held = _fields(SERVICES[service])
    for area in not_read:
        assert not held & _own(area), f"{service} holds {sorted(held & _own(area))}"


def test_the_secrets_stay_with_their_readers() -> None:
    readers = {s for s, cls in SERVICES.items() if "llm_token_secret" in cls.model_fields}
    assert readers == {"agent worker", "proxy"}
    readers = {s for s, cls in SERVICES.items() if "mcp_credentials" in cls.model_fields}
    assert readers == {"tool worker"}


def test_writing_replaces_only_what_stands_between_the_markers() -> None:
    text = PAGE.read_text()
    written = with_tables(text, "| new |\n")
    assert page_tables(written) == "\n| new |\n\n"
    assert written.split("| new |")[0].count("# Configuration") == 1
    assert with_tables(written, page_tables(text).strip("\n") + "\n") == text
