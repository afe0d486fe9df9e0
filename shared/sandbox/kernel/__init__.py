"""The taskyard kernel: a long-lived Python interpreter driven by JSON lines.

It runs inside a sandbox (a container, or a bubblewrap namespace) as ``python3 -P -m kernel``
from /opt/taskyard, and uses the standard library only; the worker imports its constants as
``shared.sandbox.kernel``. Its modules therefore import each other relatively, never `shared`.

Two processes, so that user code never touches what the worker reads:

- the **supervisor** (`supervisor.py`) holds the worker's stdin/stdout and never runs user
  code. It is not dumpable, so processes of the same uid can neither open its /proc fds nor
  read its memory; it is the sandbox's PID 1 (or a child subreaper), so every process the user
  starts is its descendant;
- the **executor** (`executor.py`), forked from it, runs the cells under a seccomp filter
  (`seccomp.py`) with /dev/null as fds 0-2. It talks to the supervisor over a private socket
  that forked children close, and the supervisor only accepts data sent by the executor's pid.

Protocol with the worker, one JSON object per line (`wire.py`):

- ready: ``{"ready": true}``, once the executor is up with its filter;
- run: ``{"id": int, "nonce": str, "code": str}`` is answered by ``{"id", "nonce", "stdout",
  "stderr", "result", "error", "interrupted"}``, where `result` is the repr of the cell's last
  expression (None when it is None or absent, as in IPython) and `error` the traceback text.
  The nonce is fresh per call and only the supervisor ever sees it, so the worker can tell a
  real reply from anything else; no reply line is longer than `MAX_LINE_BYTES`;
- interrupt: ``{"interrupt": id}``, when call `id` runs, kills every process the cells started
  and sends SIGINT to the executor, which stops the cell and keeps its namespace; the reply then
  says ``"interrupted": true``. For any other id it does nothing;
- end: stdin's EOF stops everything at once, mid-cell too. If the executor dies, the supervisor
  kills what is left and exits with the executor's status (128 + signal when it was killed).
"""

INTERRUPTED = "KeyboardInterrupt: the cell was interrupted"
OUTPUT_LIMIT = 200_000  # characters kept per stream (and for result, error) per cell
MAX_LINE_BYTES = 1 << 20  # the longest line the supervisor sends; the worker refuses longer
MAX_REQUEST_BYTES = 64 << 20  # the longest request line the supervisor accepts
