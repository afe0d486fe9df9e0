"""Per-session memory: in process (`MemoryManager`) or in Redis (`RedisMemory`), one interface."""

from shared.agentkit.memory.base import MessageInput, SessionId, SessionMemory, as_messages
from shared.agentkit.memory.manager import MemoryManager
from shared.agentkit.memory.memory import Memory
from shared.agentkit.memory.redis_memory import RedisMemory

__all__ = [
    "Memory",
    "MemoryManager",
    "MessageInput",
    "RedisMemory",
    "SessionId",
    "SessionMemory",
    "as_messages",
]
