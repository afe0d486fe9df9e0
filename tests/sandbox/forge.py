"""Cell code that writes what only the kernel should: frames on the executor's channel to its
supervisor. One copy for every test, and for every machine the kernel's filter knows.

A cell runs in the executor, so what it writes on the channel comes from the executor's own
pid, which the supervisor accepts; a process the cell forks does not (`RAW_FORK` makes one
that keeps the channel: no Python fork hooks run).
"""

from __future__ import annotations

__all__ = ["CHANNEL", "RAW_FORK", "forge_frame", "forge_from_a_child", "forge_raw"]

# Defines `send_raw(data)`, which writes bytes on every socket the process holds (in the
# executor: only its channel to the supervisor) and says on how many, and `send_frame(message)`,
# which sends a dict (as JSON) or bytes as one frame.
CHANNEL = """
import json as _json, os as _os, socket as _socket, stat as _stat
def send_raw(data):
    sent = 0
    for fd in range(3, 256):
        try:
            if not _stat.S_ISSOCK(_os.fstat(fd).st_mode):
                continue
            with _socket.socket(fileno=_os.dup(fd)) as channel:
                channel.sendall(data)
            sent += 1
        except OSError:
            pass
    return sent
def send_frame(message):
    body = message if isinstance(message, bytes) else _json.dumps(message).encode()
    return send_raw(len(body).to_bytes(4, 'big') + body)
"""
# fork(2) itself (clone with SIGCHLD where there is no fork call): 0 in the child.
RAW_FORK = (
    "__import__('ctypes').CDLL(None).syscall("
    "57 if __import__('os').uname().machine == 'x86_64' else 220, 17, 0, 0, 0, 0)"
)


def forge_raw(data: str) -> str:
    """A cell that writes the bytes Python expression `data` evaluates to on its channel."""
    return f"{CHANNEL}\nsend_raw({data})\n"


def forge_frame(message: str) -> str:
    """A cell that sends what the Python expression `message` evaluates to (a dict, or a
    frame's body as bytes) as one frame, as the executor sends its reply, then ends."""
    return f"{CHANNEL}\nsend_frame({message})\n"


def forge_from_a_child(message: str, delay_s: float, proof: str) -> str:
    """A cell that forks a process keeping the channel; `delay_s` later (when a later cell
    runs) it sends `message` (as `forge_frame`'s) on every socket it holds, writes to the file
    `proof` on how many, and exits."""
    return (
        f"{CHANNEL}\n"
        "import os as _os2, time as _time\n"
        f"if {RAW_FORK} == 0:\n"
        f"    _time.sleep({delay_s!r})\n"
        f"    sent = send_frame({message})\n"
        f"    open({proof!r}, 'w').write(str(sent))\n"
        "    _os2._exit(0)\n"
    )
