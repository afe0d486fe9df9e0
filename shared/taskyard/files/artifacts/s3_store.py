"""The artifact store in an S3-compatible object store (`TASKYARD_ARTIFACTS_BACKEND=s3`): AWS
S3, MinIO, Ceph, R2, ... through boto3. A task's artifacts are the objects
``<prefix><task id>/<name>``; the bucket's lifecycle rule expires them (docs/deployment.md
gives the rule), and `expiry` reads the bucket's rules to say whether one does.

boto3 is blocking: each call runs on a thread (`asyncio.to_thread`), off the event loop. The
task's budget is checked against a listing before the write, so parallel tool calls of one
task may pass it by an artifact each (Redis's backend checks and writes in one step).

Tested against moto's server mode, a stand-in for S3, not against S3 itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import closing
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from taskyard.files.artifacts.names import is_artifact_name, is_task_id
from taskyard.files.artifacts.store import (
    ArtifactBody,
    ArtifactLimits,
    ArtifactStoreUnavailable,
    Expiry,
    StoredArtifact,
    check_put,
    duration,
    over_task_budget,
)
from taskyard.plumbing.settings import ArtifactSettings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import LifecycleRuleOutputTypeDef

__all__ = ["S3ArtifactStore", "expiring_days"]

T = TypeVar("T")
P = ParamSpec("P")
_MISSING = frozenset({"NoSuchKey", "404"})
_DAY_S = 86400


class S3ArtifactStore:
    """Artifacts as objects under `prefix` in `bucket`, through `client`."""

    def __init__(self, client: S3Client, bucket: str, prefix: str, limits: ArtifactLimits) -> None:
        self.client = client
        self.bucket = bucket
        # One folder per deployment: "taskyard/artifacts/"; empty: the bucket's top.
        self.prefix = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
        self.limits = limits

    @classmethod
    def from_settings(cls, settings: ArtifactSettings) -> S3ArtifactStore:
        """Endpoint and region from settings (empty: AWS's defaults); credentials from the
        standard AWS chain (environment, profile, instance or task role)."""
        config = Config(
            retries={"mode": "standard", "max_attempts": 4},
            connect_timeout=5, read_timeout=30, max_pool_connections=32,
        )  # fmt: skip
        client = boto3.session.Session().client(
            "s3", endpoint_url=settings.artifacts_s3_endpoint_url or None,
            region_name=settings.artifacts_s3_region or None, config=config,
        )  # fmt: skip
        limits = ArtifactLimits.from_settings(settings)
        return cls(client, settings.artifacts_s3_bucket, settings.artifacts_s3_prefix, limits)

    async def put(self, task_id: str, name: str, data: bytes) -> None:
        check_put(task_id, name, len(data), self.limits)
        await _off_loop(self._put, task_id, name, data)

    async def open(self, task_id: str, name: str) -> ArtifactBody | None:
        if not (is_task_id(task_id) and is_artifact_name(name)):
            return None
        return await _off_loop(self._open, task_id, name)

    async def task_artifacts(self, task_id: str) -> list[StoredArtifact]:
        if not is_task_id(task_id):
            return []
        return await _off_loop(self._listed, task_id)

    async def expiry(self) -> Expiry:
        return await _off_loop(self._expiry)

    async def close(self) -> None:
        self.client.close()

    def _put(self, task_id: str, name: str, data: bytes) -> None:
        kept = {artifact.name: artifact.size for artifact in self._listed(task_id)}
        if name in kept:
            return  # the same name is the same bytes
        if sum(kept.values()) + len(data) > self.limits.task_max_bytes:
            raise over_task_budget(self.limits)
        self.client.put_object(
            Bucket=self.bucket, Key=self._key(task_id, name), Body=data,
            ContentType=StoredArtifact(name, len(data)).media_type,
        )  # fmt: skip

    def _open(self, task_id: str, name: str) -> ArtifactBody | None:
        try:
            found = self.client.get_object(Bucket=self.bucket, Key=self._key(task_id, name))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _MISSING:
                return None
            raise
        with closing(found["Body"]) as body:
            return ArtifactBody(name, body.read())

    def _listed(self, task_id: str) -> list[StoredArtifact]:
        folder = self._key(task_id, "")
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=folder
        )
        found = [
            StoredArtifact(item["Key"].removeprefix(folder), item["Size"])
            for page in pages
            for item in page.get("Contents", [])
        ]
        return sorted((a for a in found if is_artifact_name(a.name)), key=lambda a: a.name)

    def _expiry(self) -> Expiry:
        where = f"s3://{self.bucket}/{self.prefix}"
        try:
            rules = self.client.get_bucket_lifecycle_configuration(Bucket=self.bucket)["Rules"]
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "an error")
            if code != "NoSuchLifecycleConfiguration":
                return Expiry(None, f"the lifecycle rules of {where} could not be read: {code}")
            rules = []
        days = expiring_days(rules, self.prefix)
        if days is None:
            return Expiry(None, f"no lifecycle rule of the bucket expires {where}")
        after_s = days * _DAY_S
        return Expiry(after_s, f"a lifecycle rule expires {where} after {duration(after_s)}")

    def _key(self, task_id: str, name: str) -> str:
        return f"{self.prefix}{task_id}/{name}"


def expiring_days(rules: list[LifecycleRuleOutputTypeDef], prefix: str) -> int | None:
    """The fewest days after which an enabled rule expires every object under `prefix`."""
    days = [
        rule["Expiration"]["Days"]
        for rule in rules
        if rule["Status"] == "Enabled"
        and "Days" in rule.get("Expiration", {})
        and (covered := _rule_prefix(rule)) is not None
        and prefix.startswith(covered)
    ]
    return min(days, default=None)


def _rule_prefix(rule: LifecycleRuleOutputTypeDef) -> str | None:
    """The prefix a rule covers whole; None where it picks by tag or size (not every object)."""
    if "Filter" not in rule:
        return rule.get("Prefix", "")  # the older form
    picks = rule["Filter"]
    return picks.get("Prefix", "") if set(picks) <= {"Prefix"} else None


async def _off_loop(call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a blocking boto3 call on a thread; its failures as `ArtifactStoreUnavailable`."""
    try:
        return await asyncio.to_thread(call, *args, **kwargs)
    except (BotoCoreError, ClientError) as exc:
        raise ArtifactStoreUnavailable(f"the artifact store (S3) failed: {exc}") from exc
