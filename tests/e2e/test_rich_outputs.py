"""End to end: a chart comes back as an artifact through the real stack. A task plots an
uploaded CSV with pandas and matplotlib in the Docker sandbox; the figure goes to the artifact
store, is announced by an `artifact` event before the tool's message, listed on the task,
downloadable, and named to the model; the CLI saves a followed task's artifacts.

Run on each artifact store backend: Redis (the stack's own), and S3 through a moto server this
module starts on loopback (a stand-in for S3, over real HTTP from the tool worker and the
gateway processes)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from devstack.stack import LocalStack
from taskyard.agentkit.schema import ActionReturn, AgentMessage
from taskyard.client import TaskyardClient
from taskyard.client.cli import main
from taskyard.plumbing import keys
from taskyard.runtime.events import EventKind
from tests.fake_s3 import CREDENTIALS, REGION, documented_lifecycle, fake_s3, new_bucket, s3_client

pytestmark = pytest.mark.e2e

CSV = b"month,sales\n1,10\n2,14\n3,9\n4,17\n"
PLOT = (
    "Plot the sales.\n```python\nimport pandas as pd\nimport matplotlib.pyplot as plt\n"
    "df = pd.read_csv('sales.csv')\ndf.plot(x='month', y='sales')\nplt.show()\n"
    "df.describe().loc[['mean']]\n```"
)
PREFIX = "deploy-a/artifacts/"


@dataclass
class Bucket:
    """The S3 stand-in's bucket the stack keeps artifacts in."""

    endpoint: str
    client: Any
    name: str


@pytest.fixture(scope="module", params=["redis", "s3"])
def bucket(request: pytest.FixtureRequest) -> Iterator[Bucket | None]:
    """None for the Redis backend; for S3, a fresh bucket (with the documented lifecycle rule)
    on a moto server of this module's."""
    if request.param == "redis":
        yield None
        return
    with fake_s3() as endpoint:
        client = s3_client(endpoint)
        lifecycle = documented_lifecycle()
        lifecycle["Rules"][0]["Filter"]["Prefix"] = PREFIX
        yield Bucket(endpoint, client, new_bucket(client, lifecycle))


@pytest.fixture(scope="module")
def stack(sandbox_image: str, bucket: Bucket | None) -> Iterator[LocalStack]:
    extra = {} if bucket is None else _s3_settings(bucket)
    stack = LocalStack(api_keys="key-a=tenant-a,key-b=tenant-b", extra_env=extra).start()
    yield stack
    stack.stop()


def _s3_settings(bucket: Bucket) -> dict[str, str]:
    return {
        "TASKYARD_ARTIFACTS_BACKEND": "s3",
        "TASKYARD_ARTIFACTS_S3_BUCKET": bucket.name,
        "TASKYARD_ARTIFACTS_S3_PREFIX": PREFIX,
        "TASKYARD_ARTIFACTS_S3_ENDPOINT_URL": bucket.endpoint,
        "TASKYARD_ARTIFACTS_S3_REGION": REGION,
        **CREDENTIALS,  # the standard AWS chain's variables
    }


def _kept(stack: LocalStack, bucket: Bucket | None, task_id: str) -> dict[str, int]:
    """The task's artifacts where the backend keeps them: name to size."""
    if bucket is None:
        with redis.Redis.from_url(f"{stack.redis_url}/0") as r:
            kept = r.hgetall(keys.task_artifacts(task_id))
        return {name.decode(): len(data) for name, data in kept.items()}
    listed = bucket.client.list_objects_v2(Bucket=bucket.name, Prefix=f"{PREFIX}{task_id}/")
    return {o["Key"].rsplit("/", 1)[1]: o["Size"] for o in listed.get("Contents", [])}


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_a_chart_comes_back_as_an_artifact(
    client: TaskyardClient, stack: LocalStack, bucket: Bucket | None
) -> None:
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
    # In the backend's store, never a directory the gateway reads.
    assert _kept(stack, bucket, task_id) == {a["name"]: a["size"] for a in listed}
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


def test_the_tool_worker_said_how_artifacts_expire(
    stack: LocalStack, bucket: Bucket | None
) -> None:
    log = stack.log_path("tool_worker").read_text(errors="replace")
    if bucket is None:
        assert "artifacts (redis backend): each task's artifacts expire 7 days after" in log
    else:
        where = f"s3://{bucket.name}/{PREFIX}"
        assert f"artifacts (s3 backend): a lifecycle rule expires {where} after 7 days" in log
    assert "artifacts never expire" not in log
