"""The configuration tables (docs/configuration.md), from the settings classes: prints them, or
with `--write` puts them into that page between its two markers.
`tests/settings/test_settings_table.py` keeps the page equal to this output.

    python -m scripts.settings_table [--write]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pydantic_settings import BaseSettings

from services.engine_proxy.settings import EngineProxySettings
from services.llm_proxy.settings import ProxySettings
from taskyard.plumbing.settings import AgentWorkerSettings, GatewaySettings, ToolWorkerSettings
from taskyard.plumbing.settings.table import markdown

__all__ = ["BEGIN", "END", "PAGE", "SERVICES", "page_tables", "with_tables"]

# Each process kind and its settings class, in the order of the "Read by" column.
SERVICES: dict[str, type[BaseSettings]] = {
    "gateway": GatewaySettings,
    "agent worker": AgentWorkerSettings,
    "tool worker": ToolWorkerSettings,
    "proxy": ProxySettings,
    "engine proxy": EngineProxySettings,
}
PAGE = Path(__file__).resolve().parents[1] / "docs/configuration.md"
BEGIN = "<!-- settings tables: made by `python -m scripts.settings_table --write` -->\n"
END = "<!-- end of the settings tables -->\n"


def page_tables(text: str) -> str:
    """What stands between the page's markers."""
    return text.split(BEGIN, 1)[1].split(END, 1)[0]


def with_tables(text: str, tables: str) -> str:
    """`text` with the tables between its markers replaced by `tables`."""
    head, rest = text.split(BEGIN, 1)
    return head + BEGIN + "\n" + tables + "\n" + END + rest.split(END, 1)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--write", action="store_true", help="update docs/configuration.md in place"
    )
    tables = markdown(SERVICES)
    if parser.parse_args().write:
        PAGE.write_text(with_tables(PAGE.read_text(), tables))
    else:
        print(tables, end="")


if __name__ == "__main__":
    main()
