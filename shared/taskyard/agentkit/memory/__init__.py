"""Per-session memory: in process (`MemoryManager`) or in Redis (`RedisMemory`), one interface."""

from taskyard.agentkit.memory.base import MessageInput, SessionId, SessionMemory, as_messages
from taskyard.agentkit.memory.manager import MemoryManager
from taskyard.agentkit.memory.memory import Memory
from taskyard.agentkit.memory.redis_memory import RedisMemory

__all__ = [
    "Memory",
    "MemoryManager",
    "MessageInput",
    "RedisMemory",
    "SessionId",
    "SessionMemory",
    "as_messages",
]
