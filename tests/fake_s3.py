"""An S3-compatible server on loopback for the S3 artifact store's tests: moto's server mode in
a thread of the test process, reached over real HTTP through boto3. A stand-in for S3, not S3
itself: what S3 does on its own (running a lifecycle rule) it does not do."""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from moto.server import ThreadedMotoServer

ROOT = Path(__file__).resolve().parents[1]
REGION = "us-east-1"
# What the S3 backend reads from the standard AWS chain; moto takes any.
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
}


@contextlib.contextmanager
def fake_s3() -> Iterator[str]:
    """A moto server on 127.0.0.1 and a free port; yields its endpoint URL."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def s3_client(endpoint: str, attempts: int = 2) -> Any:
    """A boto3 S3 client of the fake server (`attempts` tries per call)."""
    config = Config(retries={"mode": "standard", "max_attempts": attempts}, connect_timeout=2)
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name=REGION, config=config,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )  # fmt: skip


def new_bucket(client: Any, lifecycle: dict[str, Any] | None = None) -> str:
    """A fresh bucket, with `lifecycle` as its lifecycle configuration if given."""
    bucket = f"taskyard-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    if lifecycle is not None:
        client.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration=lifecycle)
    return bucket


def documented_lifecycle() -> dict[str, Any]:
    """The lifecycle configuration docs/deployment.md tells operators to give the bucket."""
    page = (ROOT / "docs" / "deployment.md").read_text()
    section = page.split("\n## Artifact storage\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```json\n(.*?)```", section, re.DOTALL)
    assert found, "docs/deployment.md's artifact storage section shows no lifecycle rule"
    rule: dict[str, Any] = json.loads(found.group(1))
    return rule
