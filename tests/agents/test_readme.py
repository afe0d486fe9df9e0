"""The README's programming model section runs as written, against the scripted model."""

from __future__ import annotations

import re
from pathlib import Path

from services.scripted_model import ScriptedModelThread

README = Path(__file__).resolve().parents[2] / "README.md"
PROXY_URL = "http://127.0.0.1:8400/v1"


def test_readme_examples_run() -> None:
    section = README.read_text().split("## The programming model", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(blocks) >= 4
    source = "\n".join(blocks)
    assert PROXY_URL in source
    with ScriptedModelThread() as model:
        namespace: dict[str, object] = {"__name__": "readme"}
        exec(compile(source.replace(PROXY_URL, model.base_url), str(README), "exec"), namespace)
    assert namespace["reply"].content.startswith("You said: hi")  # type: ignore[attr-defined]
