"""A session-files request over a real Redis: staging bounded per session, answers with their
bytes, waits that end, and nothing that outlives its time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis
import redis.asyncio as aioredis

from taskyard.files.info import FileInfo
from taskyard.files.transfer import FilesReply, FileTransfer
from taskyard.plumbing import keys


@pytest.fixture
async def transfer(redis_server: str, redis_client: redis.Redis) -> AsyncIterator[FileTransfer]:
    client = aioredis.Redis.from_url(f"{redis_server}/0")
    yield FileTransfer(client, ttl_s=5)
    await client.aclose()


async def test_uploads_are_staged_within_the_sessions_quota(transfer: FileTransfer) -> None:
    assert await transfer.stage("r1", "t", "s", b"x" * 60, quota=100)
    assert not await transfer.stage("r2", "t", "s", b"y" * 60, quota=100)  # 120 staged: refused
    assert await transfer.stage("r3", "t", "other", b"y" * 60, quota=100)  # another session's own
    assert await transfer.r.ttl(keys.files_upload("r1")) > 0
    assert await transfer.take_upload("r1", "t", "s") == b"x" * 60
    assert await transfer.take_upload("r1", "t", "s") is None  # taken once
    assert await transfer.stage("r2", "t", "s", b"y" * 60, quota=100)  # room again
    assert await transfer.take_upload("r2", "t", "s") == b"y" * 60
    assert not await transfer.r.exists(keys.files_staged("t", "s"))


async def test_an_answer_and_its_bytes_reach_the_waiting_gateway(transfer: FileTransfer) -> None:
    reply = FilesReply(outcome="ok", file=FileInfo(path="a", size=3, modified=1.0))
    waiting = asyncio.create_task(transfer.wait("r1", timeout=5))
    await asyncio.sleep(0.05)
    await transfer.answer("r1", reply, b"\x00\xff\x01")
    assert await waiting == (reply, b"\x00\xff\x01")
    assert await transfer.r.keys("files:*") == []  # nothing left behind


async def test_a_wait_ends_without_an_answer(transfer: FileTransfer) -> None:
    assert await transfer.wait("nobody", timeout=0.1) is None


async def test_an_answer_nobody_takes_expires(transfer: FileTransfer) -> None:
    await transfer.answer("r1", FilesReply(outcome="ok"), b"data")
    assert 0 < await transfer.r.ttl(keys.files_reply("r1")) <= transfer.ttl_s
    assert 0 < await transfer.r.ttl(keys.files_download("r1")) <= transfer.ttl_s
