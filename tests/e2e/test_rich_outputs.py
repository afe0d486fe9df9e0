"""End to end: a chart comes back as an artifact through the real stack. A task plots an
uploaded CSV with pandas and matplotlib in the Docker sandbox; the figure is a file of the
task, announced by an `artifact` event before the tool's message, listed on the task,
downloadable, and named to the model; the CLI saves a followed task's artifacts."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.stack import LocalStack
from shared.cli import main
from shared.client import TaskyardClient
from shared.events import EventKind
from shared.schema import ActionReturn, AgentMessage

pytestmark = pytest.mark.e2e

CSV = b"month,sales\n1,10\n2,14\n3,9\n4,17\n"
PLOT = (
    "Plot the sales.\n```python\nimport pandas as pd\nimport matplotlib.pyplot as plt\n"
    "df = pd.read_csv('sales.csv')\ndf.plot(x='month', y='sales')\nplt.show()\n"
    "df.describe().loc[['mean']]\n```"
)


@pytest.fixture(scope="module")
def stack(sandbox_image: str) -> Iterator[LocalStack]:
    stack = LocalStack(api_keys="key-a=tenant-a,key-b=tenant-b").start()
    yield stack
    stack.stop()


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_a_chart_comes_back_as_an_artifact(client: TaskyardClient, stack: LocalStack) -> None:
    client.upload("chart", CSV, "sales.csv")
    task_id = client.submit(PLOT, session_id="chart", files=["sales.csv"])["id"]
    events = list(client.events(task_id))
    assert events[-1].data["status"] == "succeeded", events[-1]
    kinds = [e.kind for e in events]
    figure, table = (e.data for e in events if e.kind == EventKind.ARTIFACT)
    # Both announced before the tool's message that names them.
    senders = [e.data.get("sender") if e.kind == EventKind.MESSAGE else None for e in events]
    tool_at = senders.index("IPythonInterpreter")
    assert kinds.index(EventKind.ARTIFACT) < tool_at
    assert (figure["kind"], figure["width"], figure["height"]) == ("figure", 640, 480)
    assert figure["url"] == f"/v1/tasks/{task_id}/artifacts/{figure['name']}"
    assert table["kind"] == "table" and table["name"].endswith(".html")

    listed = client.artifacts(task_id)
    assert [a["name"] for a in listed] == [figure["name"], table["name"]]
    png = client.http.get(figure["url"])
    assert png.headers["content-type"] == "image/png" and _png_size(png.content) == (640, 480)
    assert len(png.content) == figure["size"]
    assert b"<table" in client.http.get(table["url"]).content

    tool = AgentMessage.model_validate(events[tool_at].data).content
    assert isinstance(tool, ActionReturn)
    text = tool.format_result()
    assert f"[image: {figure['name']}, 640\u00d7480]" in text
    assert f"[table: {table['name']}, " in text and "mean" in text
    assert [a.url for a in tool.artifacts or []] == [figure["url"], table["url"]]
    assert all(a.data is None for a in tool.artifacts or [])  # no bytes in Redis
    answer = client.get(task_id)["result"]
    assert f"[image: {figure['name']}, 640\u00d7480]" in answer  # the scripted model quotes it
    other = TaskyardClient(stack.gateway_url, "key-b")
    assert other.http.get(figure["url"]).status_code == 404
    other.close()


def test_the_cli_saves_a_followed_tasks_artifacts(
    stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "sales.csv"
    csv.write_bytes(CSV)
    folder = tmp_path / "out"
    argv = ["--gateway", stack.gateway_url, "--api-key", "key-a", "submit", PLOT,
            "--file", str(csv), "--artifacts", str(folder)]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "uploaded " in printed and "as sales.csv (" in printed
    saved = sorted(folder.iterdir())
    assert sorted(p.suffix for p in saved) == [".html", ".png"]
    (png,) = [p for p in saved if p.suffix == ".png"]
    assert _png_size(png.read_bytes()) == (640, 480)
    assert f"    saved {png}" in printed
    assert f"2 artifact(s) saved in {folder.resolve()}" in printed
    assert "· artifact [image: " in printed  # the live transcript names it too
