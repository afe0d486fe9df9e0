"""The artifact store's contract, run on each backend: the Redis one on a real Redis, the S3 one
on moto's server mode over real HTTP (a stand-in for S3). Round trip, one count per name, the
caps, listing, a missing artifact, expiry, a backend that does not answer; then what only one
backend does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import redis

from devstack.procs import free_port
from taskyard.files.artifacts import (
    ArtifactLimits,
    ArtifactRefused,
    ArtifactStore,
    ArtifactStoreUnavailable,
    RedisArtifactStore,
    StoredArtifact,
    artifact_name,
    artifact_url,
    make_artifact_store,
)
from taskyard.files.artifacts.s3_store import S3ArtifactStore, expiring_days
from taskyard.plumbing import keys
from taskyard.plumbing.keys import RETENTION_S
from taskyard.plumbing.settings import ArtifactSettings
from taskyard.runtime.task import new_task_id
from tests.fake_s3 import documented_lifecycle, fake_s3, new_bucket, s3_client

PNG = b"\x89PNG figure"
LIMITS = ArtifactLimits(artifact_max_bytes=2000, task_max_bytes=3000)
Maker = Callable[..., ArtifactStore]


def _name(data: bytes, kind: str = "figure", mime: str = "image/png") -> str:
    return artifact_name(kind, mime, data)


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with fake_s3() as endpoint:
        yield endpoint


@pytest.fixture(params=["redis", "s3"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def make_store(
    request: pytest.FixtureRequest, backend: str, redis_client: redis.Redis, redis_server: str
) -> AsyncIterator[Maker]:
    """Stores of one backend: `make_store(limits)`; the S3 ones each on a bucket of its own
    that carries the lifecycle rule docs/deployment.md gives."""
    made: list[ArtifactStore] = []

    def make(limits: ArtifactLimits = LIMITS) -> ArtifactStore:
        store: ArtifactStore
        if backend == "redis":
            store = RedisArtifactStore.from_url(f"{redis_server}/0", limits)
        else:
            client = s3_client(request.getfixturevalue("s3_endpoint"))
            bucket = new_bucket(client, documented_lifecycle())
            store = S3ArtifactStore(client, bucket, "taskyard/artifacts", limits)
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()


async def test_an_artifact_goes_in_and_comes_back(make_store: Maker) -> None:
    store, task, other = make_store(), new_task_id(), new_task_id()
    name, table = _name(PNG), _name(b"<table>", "table", "text/html")
    await store.put(task, name, PNG)
    await store.put(task, table, b"<table>")
    body = await store.open(task, name)
    assert body is not None
    assert (body.name, body.data, body.size, body.media_type) == (name, PNG, len(PNG), "image/png")
    opened = await store.open(task, table)
    assert opened is not None and opened.media_type == "text/html"
    assert await store.task_artifacts(task) == sorted(
        [StoredArtifact(name, len(PNG)), StoredArtifact(table, 7)], key=lambda a: a.name
    )
    # Another task keeps nothing, and cannot reach this one's by name.
    assert await store.task_artifacts(other) == []
    assert await store.open(other, name) is None


async def test_a_missing_artifact_is_none(make_store: Maker) -> None:
    store, task = make_store(), new_task_id()
    assert await store.open(task, _name(b"never kept")) is None
    await store.put(task, _name(PNG), PNG)
    assert await store.open(task, _name(b"never kept")) is None
    for bad in ("../x.png", "figure-abc.png", ""):  # never a lookup, never a path
        assert await store.open(task, bad) is None
    assert await store.open("../../etc", _name(PNG)) is None
    assert await store.task_artifacts("task_../x") == []


async def test_the_same_name_is_kept_and_counted_once(make_store: Maker) -> None:
    store, task = make_store(), new_task_id()
    data = b"x" * 1800  # twice this is over the task's 3000 bytes
    for _ in range(3):  # a redelivered tool job keeps the same artifact again
        await store.put(task, _name(data), data)
    assert await store.task_artifacts(task) == [StoredArtifact(_name(data), 1800)]
    await store.put(task, _name(b"y" * 1000), b"y" * 1000)  # 2800 in all: within the budget


async def test_an_artifact_over_its_cap_is_refused(make_store: Maker) -> None:
    store, task = make_store(), new_task_id()
    big = b"z" * 2001
    with pytest.raises(ArtifactRefused) as refused:
        await store.put(task, _name(big), big)
    assert refused.value.reason == "it is 2.0 kB, over the 2.0 kB one artifact may be " + (
        "(ARTIFACTS_MAX_BYTES)"
    )
    assert await store.task_artifacts(task) == []


async def test_a_task_keeps_at_most_its_budget(make_store: Maker) -> None:
    store, task, other = make_store(), new_task_id(), new_task_id()
    first, second, third = b"a" * 1500, b"b" * 1500, b"c" * 1
    await store.put(task, _name(first), first)
    await store.put(task, _name(second), second)
    with pytest.raises(ArtifactRefused) as refused:
        await store.put(task, _name(third), third)
    assert refused.value.reason == (
        "the task's artifacts would pass 3.0 kB (ARTIFACTS_TASK_MAX_BYTES)"
    )
    assert [a.name for a in await store.task_artifacts(task)] == sorted(
        [_name(first), _name(second)]
    )
    assert await store.open(task, _name(third)) is None
    await store.put(other, _name(third), third)  # the budget is per task


@pytest.mark.parametrize("name", ["../x.png", "figure-abc.png", "figure-0123456789ab.exe", ""])
async def test_only_artifact_names_are_kept(make_store: Maker, name: str) -> None:
    store = make_store()
    with pytest.raises(ArtifactRefused, match="not an artifact name"):
        await store.put(new_task_id(), name, b"x")
    with pytest.raises(ArtifactRefused, match="not a task id"):
        await store.put("../../etc", _name(b"x"), b"x")


async def test_artifacts_expire_with_the_tasks_retention(make_store: Maker) -> None:
    expiry = await make_store().expiry()
    assert expiry.after_s == RETENTION_S, expiry.how
    assert "7 days" in expiry.how


async def test_a_store_that_does_not_answer_says_so(backend: str) -> None:
    closed = f"127.0.0.1:{free_port()}"  # nothing listens there
    store: ArtifactStore
    if backend == "redis":
        store = RedisArtifactStore.from_url(f"redis://{closed}/0", LIMITS)
    else:
        store = S3ArtifactStore(s3_client(f"http://{closed}", attempts=1), "b", "p", LIMITS)
    task = new_task_id()
    with pytest.raises(ArtifactStoreUnavailable):
        await store.put(task, _name(PNG), PNG)
    with pytest.raises(ArtifactStoreUnavailable):
        await store.open(task, _name(PNG))
    with pytest.raises(ArtifactStoreUnavailable):
        await store.task_artifacts(task)
    await store.close()


# -- the Redis backend -------------------------------------------------------------------------


async def test_redis_drops_a_tasks_artifacts_after_the_retention(
    redis_client: redis.Redis, redis_server: str
) -> None:
    store = RedisArtifactStore.from_url(f"{redis_server}/0", ArtifactLimits(2000, 3000, 0.5))
    task = new_task_id()
    await store.put(task, _name(PNG), PNG)
    assert 0 < redis_client.pttl(keys.task_artifacts(task)) <= 500
    assert 0 < redis_client.pttl(keys.task_artifact_bytes(task)) <= 500
    await asyncio.sleep(0.3)
    await store.put(task, _name(b"later"), b"later")  # a later artifact keeps them all longer
    await asyncio.sleep(0.3)
    assert len(await store.task_artifacts(task)) == 2
    await asyncio.sleep(0.4)
    assert await store.task_artifacts(task) == []
    assert await store.open(task, _name(PNG)) is None
    assert redis_client.exists(keys.task_artifact_bytes(task)) == 0  # the budget starts again
    await store.close()


async def test_parallel_puts_of_a_task_stay_within_its_budget(
    redis_client: redis.Redis, redis_server: str
) -> None:
    store = RedisArtifactStore.from_url(f"{redis_server}/0", LIMITS)
    task = new_task_id()
    datas = [bytes([i]) * 1000 for i in range(10)]
    outcomes = await asyncio.gather(
        *(store.put(task, _name(d), d) for d in datas), return_exceptions=True
    )
    assert sum(o is None for o in outcomes) == 3
    assert all(isinstance(o, ArtifactRefused) for o in outcomes if o is not None)
    assert sum(a.size for a in await store.task_artifacts(task)) == 3000
    await store.close()


# -- the S3 backend -----------------------------------------------------------------------------


async def test_s3_objects_are_named_under_the_prefix_with_their_type(s3_endpoint: str) -> None:
    client = s3_client(s3_endpoint)
    bucket = new_bucket(client)
    store = S3ArtifactStore(client, bucket, "/deploy-a/artifacts/", LIMITS)
    task = new_task_id()
    await store.put(task, _name(PNG), PNG)
    head = client.head_object(Bucket=bucket, Key=f"deploy-a/artifacts/{task}/{_name(PNG)}")
    assert head["ContentType"] == "image/png" and head["ContentLength"] == len(PNG)
    # What is not an artifact under the task's folder is not listed.
    client.put_object(Bucket=bucket, Key=f"deploy-a/artifacts/{task}/notes.txt", Body=b"x")
    assert [a.name for a in await store.task_artifacts(task)] == [_name(PNG)]
    await store.close()


async def test_s3_says_when_no_lifecycle_rule_expires_its_objects(s3_endpoint: str) -> None:
    client = s3_client(s3_endpoint)
    bare = S3ArtifactStore(client, new_bucket(client), "taskyard/artifacts/", LIMITS)
    expiry = await bare.expiry()
    assert expiry.after_s is None
    assert "no lifecycle rule of the bucket expires s3://" in expiry.how
    other = {"Rules": [_rule({"Prefix": "other/"}, 1)]}
    elsewhere = S3ArtifactStore(client, new_bucket(client, other), "taskyard/artifacts/", LIMITS)
    assert (await elsewhere.expiry()).after_s is None
    missing = S3ArtifactStore(client, "no-such-bucket", "taskyard/artifacts/", LIMITS)
    expiry = await missing.expiry()
    assert expiry.after_s is None and "NoSuchBucket" in expiry.how


def _rule(picks: dict[str, Any], days: int, status: str = "Enabled") -> dict[str, Any]:
    return {"Status": status, "Filter": picks, "Expiration": {"Days": days}}


@pytest.mark.parametrize(
    ("rules", "days"),
    [
        ([_rule({"Prefix": "taskyard/"}, 7)], 7),
        ([_rule({}, 30), _rule({"Prefix": "taskyard/artifacts/"}, 7)], 7),  # the first to act
        ([{"Status": "Enabled", "Prefix": "", "Expiration": {"Days": 3}}], 3),  # older form
        ([_rule({"Prefix": "taskyard/artifacts/"}, 7, "Disabled")], None),
        ([_rule({"Prefix": "taskyard/artifacts/x"}, 7)], None),  # a part of the prefix only
        ([_rule({"Tag": {"Key": "k", "Value": "v"}}, 7)], None),  # only tagged objects
        ([{"Status": "Enabled", "Filter": {}, "Expiration": {"Date": "2030-01-01"}}], None),
    ],
)
def test_which_lifecycle_rules_expire_the_prefix(
    rules: list[dict[str, Any]], days: int | None
) -> None:
    assert expiring_days(rules, "taskyard/artifacts/") == days  # type: ignore[arg-type]


async def test_a_missing_bucket_is_unavailable_not_refused(s3_endpoint: str) -> None:
    store = S3ArtifactStore(s3_client(s3_endpoint), "no-such-bucket", "p", LIMITS)
    with pytest.raises(ArtifactStoreUnavailable, match="NoSuchBucket"):
        await store.put(new_task_id(), _name(PNG), PNG)
    await store.close()


# -- choosing a backend ---------------------------------------------------------------------


async def test_the_setting_chooses_the_backend(redis_server: str, s3_endpoint: str) -> None:
    redis_store = make_artifact_store(ArtifactSettings(redis_url=f"{redis_server}/0"))
    assert isinstance(redis_store, RedisArtifactStore)
    await redis_store.close()
    chosen = ArtifactSettings(
        artifacts_backend="s3", artifacts_s3_bucket="art", artifacts_s3_endpoint_url=s3_endpoint,
        artifacts_s3_region="eu-west-3", artifacts_max_bytes=5, artifacts_task_max_bytes=9,
    )  # fmt: skip
    s3_store = make_artifact_store(chosen)
    assert isinstance(s3_store, S3ArtifactStore)
    assert (s3_store.bucket, s3_store.prefix) == ("art", "taskyard/artifacts/")
    assert s3_store.client.meta.endpoint_url == s3_endpoint
    assert s3_store.client.meta.region_name == "eu-west-3"
    assert s3_store.limits == ArtifactLimits(5, 9, RETENTION_S)
    await s3_store.close()


def test_an_unknown_backend_or_a_bucketless_s3_is_refused() -> None:
    with pytest.raises(
        ValueError, match="TASKYARD_ARTIFACTS_BACKEND: unknown 'disk'; known: redis, s3"
    ):
        make_artifact_store(ArtifactSettings(artifacts_backend="disk"))
    with pytest.raises(ValueError, match="needs TASKYARD_ARTIFACTS_S3_BUCKET"):
        ArtifactSettings(artifacts_backend="s3")


# -- names -----------------------------------------------------------------------------------


def test_a_name_is_the_kind_and_a_hash_of_the_bytes() -> None:
    name = _name(PNG)
    assert name.startswith("figure-") and name.endswith(".png")
    assert name == _name(PNG) != _name(PNG + b"!")
    task = new_task_id()
    assert artifact_url(task, name) == f"/v1/tasks/{task}/artifacts/{name}"
    with pytest.raises(ValueError):
        artifact_name("image", "application/x-evil", b"x")
