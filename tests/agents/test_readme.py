"""The programming model's page (docs/programming-model.md) runs as written, every Python
block in order, against the scripted model."""

from __future__ import annotations

import re
from pathlib import Path

from devstack.scripted_model import ScriptedModelThread

PAGE = Path(__file__).resolve().parents[2] / "docs" / "programming-model.md"
PROXY_URL = "http://127.0.0.1:8400/v1"


def test_the_programming_model_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.DOTALL)
    assert len(blocks) >= 5
    source = "\n".join(blocks)
    assert PROXY_URL in source
    with ScriptedModelThread() as model:
        namespace: dict[str, object] = {"__name__": "readme"}
        exec(compile(source.replace(PROXY_URL, model.base_url), str(PAGE), "exec"), namespace)
    assert namespace["reply"].content.startswith("You said: hi")  # type: ignore[attr-defined]
    assert "Researcher" in namespace  # the last block, the registered agent, ran too
