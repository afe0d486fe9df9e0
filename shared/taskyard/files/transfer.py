"""A session-files request between the gateway and the tool worker holding the session's
sandbox, over Redis: the only thing both reach.

The gateway runs no sandbox, and which tool worker holds a session is whichever takes its
jobs, so a request goes as a job on the interpreter's queue (`SessionFilesJob`) and its bytes
wait in Redis beside it:

- an upload is staged first (`stage`), bounded per session (the session's quota of staged
  bytes, so concurrent uploads cannot fill Redis) and kept only `ttl_s`; the worker takes it
  (`take_upload`) and writes it into the sandbox;
- the worker answers on the request's reply list (`answer`), a read's bytes in a key beside
  it; the gateway waits on that list (`wait`, a blocking pop) for as long as a person waits.

Nothing lasts longer than `ttl_s`: a request nobody answered, or an answer nobody took,
expires with its bytes. Bytes travel raw: this client does not decode.
"""

from __future__ import annotations

from typing import Literal, cast

import redis.asyncio as aioredis
from pydantic import BaseModel

from taskyard.files.info import FileInfo, FileListing
from taskyard.plumbing import keys

__all__ = ["FileTransfer", "FilesReply", "Outcome"]

Outcome = Literal[
    "ok", "no_session", "not_found", "not_a_file", "invalid", "too_large", "quota", "no_space",
    "unavailable",
]  # fmt: skip

# KEYS: the upload, the session's staged-bytes counter. ARGV: data, size, quota, ttl (s).
_STAGE = """
local staged = redis.call('INCRBY', KEYS[2], ARGV[2])
if staged > tonumber(ARGV[3]) then
  redis.call('DECRBY', KEYS[2], ARGV[2])
  return 0
end
redis.call('EXPIRE', KEYS[2], ARGV[4])
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[4])
return 1
"""
# KEYS: the upload, the session's staged-bytes counter. Returns the bytes, or nil.
_TAKE = """
local data = redis.call('GET', KEYS[1])
if not data then return false end
redis.call('DEL', KEYS[1])
if redis.call('DECRBY', KEYS[2], string.len(data)) <= 0 then redis.call('DEL', KEYS[2]) end
return data
"""


class FilesReply(BaseModel):
    """The tool worker's answer: `outcome` ok, or why not (`detail` in words)."""

    outcome: Outcome
    detail: str = ""
    file: FileInfo | None = None  # what a write made
    listing: FileListing | None = None  # a list's answer; a read's bytes travel beside


class FileTransfer:
    """Both ends of the requests, on a client that does not decode responses."""

    def __init__(self, client: aioredis.Redis, ttl_s: float) -> None:
        self.r = client
        self.ttl_s = max(1, int(ttl_s) + 1)
        self._stage = client.register_script(_STAGE)
        self._take = client.register_script(_TAKE)

    async def close(self) -> None:
        await self.r.aclose()

    # -- the gateway's end -----------------------------------------------------------------

    async def stage(
        self, request_id: str, tenant: str, session_id: str, data: bytes, quota: int
    ) -> bool:
        """Keep an upload for the worker; False (nothing kept) when the session's staged
        uploads would pass `quota` bytes."""
        keys_ = [keys.files_upload(request_id), keys.files_staged(tenant, session_id)]
        return bool(await self._stage(keys=keys_, args=[data, len(data), quota, self.ttl_s]))

    async def wait(self, request_id: str, timeout: float) -> tuple[FilesReply, bytes] | None:
        """The answer and a read's bytes (else b""), or None if none came within `timeout`."""
        popped = await self.r.blpop([keys.files_reply(request_id)], timeout=timeout)
        if popped is None:
            return None
        reply = FilesReply.model_validate_json(popped[1])
        data = cast("bytes | None", await self.r.getdel(keys.files_download(request_id)))
        return reply, data or b""  # bytes: this client does not decode

    # -- the worker's end ------------------------------------------------------------------

    async def take_upload(self, request_id: str, tenant: str, session_id: str) -> bytes | None:
        """The staged upload (gone from Redis now), or None if it expired."""
        keys_ = [keys.files_upload(request_id), keys.files_staged(tenant, session_id)]
        data: bytes | None = await self._take(keys=keys_)
        return data

    async def answer(self, request_id: str, reply: FilesReply, data: bytes = b"") -> None:
        """Give the gateway its answer; `data` (a read's bytes) is set before the answer
        appears, so a waiting gateway always finds it."""
        async with self.r.pipeline(transaction=True) as pipe:
            if data:
                pipe.set(keys.files_download(request_id), data, ex=self.ttl_s)
            pipe.rpush(keys.files_reply(request_id), reply.model_dump_json())
            pipe.expire(keys.files_reply(request_id), self.ttl_s)
            await pipe.execute()
