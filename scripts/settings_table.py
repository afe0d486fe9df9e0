"""The README's configuration tables, from the settings classes: prints them, or with
`--write` puts them into README.md between its two markers. `tests/settings/test_settings_table.py`
keeps the README equal to this output.

    python -m scripts.settings_table [--write]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pydantic_settings import BaseSettings

from services.llm_proxy.settings import ProxySettings
from shared.plumbing.settings import AgentWorkerSettings, GatewaySettings, ToolWorkerSettings
from shared.plumbing.settings.table import markdown

__all__ = ["BEGIN", "END", "README", "SERVICES", "readme_tables", "with_tables"]

# Each process kind and its settings class, in the order of the "Read by" column.
SERVICES: dict[str, type[BaseSettings]] = {
    "gateway": GatewaySettings,
    "agent worker": AgentWorkerSettings,
    "tool worker": ToolWorkerSettings,
    "proxy": ProxySettings,
}
README = Path(__file__).resolve().parents[1] / "README.md"
BEGIN = "<!-- settings tables: made by `python -m scripts.settings_table --write` -->\n"
END = "<!-- end of the settings tables -->\n"


def readme_tables(text: str) -> str:
    """What stands between the README's markers."""
    return text.split(BEGIN, 1)[1].split(END, 1)[0]


def with_tables(text: str, tables: str) -> str:
    """`text` with the tables between its markers replaced by `tables`."""
    head, rest = text.split(BEGIN, 1)
    return head + BEGIN + "\n" + tables + "\n" + END + rest.split(END, 1)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="update README.md in place")
    tables = markdown(SERVICES)
    if parser.parse_args().write:
        README.write_text(with_tables(README.read_text(), tables))
    else:
        print(tables, end="")


if __name__ == "__main__":
    main()
