"""Per-session memory: in process (`MemoryManager`) or in Redis (`RedisMemory`), one interface."""

from shared.memory.base import MessageInput, SessionId, SessionMemory, as_messages
from shared.memory.manager import MemoryManager
from shared.memory.memory import Memory
from shared.memory.redis_memory import RedisMemory

__all__ = [
    "Memory",
    "MemoryManager",
    "MessageInput",
    "RedisMemory",
    "SessionId",
    "SessionMemory",
    "as_messages",
]
