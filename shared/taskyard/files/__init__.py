"""Files of sessions and tasks, outside the sandbox: what the gateway and the tool worker share.

- `info`: a file's description (`FileInfo`) and sizes in words;
- `transfer`: a session-files request and its answer over Redis, between the gateway and the
  tool worker that holds the session's sandbox;
- `artifacts`: the artifact store (Redis or S3-compatible) where tool workers keep the files
  a task's tools made (figures, tables), and gateways serve them from.

Only `info` is imported here: the others are imported where they are used.
"""

from taskyard.files.info import FileInfo, FileListing, human_size

__all__ = ["FileInfo", "FileListing", "human_size"]
