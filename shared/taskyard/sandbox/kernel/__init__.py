"""The taskyard kernel: a long-lived Python interpreter driven by JSON lines.

It runs inside a sandbox (a container, or a bubblewrap namespace) as ``python3 -P -m kernel``
from /opt/taskyard, and uses the standard library only; the worker imports its constants as
``taskyard.sandbox.kernel``. Its modules therefore import each other relatively, never `shared`.

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
  "stderr", "result", "error", "interrupted", "display"}``, where `result` is the repr of the
  cell's last expression (None when it is None or absent, as in IPython), `error` the traceback
  text, and `display` the cell's rich outputs (Jupyter's display_data: figures, images, HTML;
  `display.py`), each ``{"mime", "data", "text", "kind"}`` with binary data in base64.
  The nonce is fresh per call and only the supervisor ever sees it, so the worker can tell a
  real reply from anything else; no reply line is longer than `MAX_LINE_BYTES`. The supervisor
  builds the reply from the executor's frame within every cap (`replies.py`): a cell runs in
  the executor and could have written that frame itself;
- files: ``{"id", "nonce", "file_op": "write" | "read" | "list", ...}`` reads or writes the
  working directory (`files.py`), done by the supervisor itself, never by user code:
  ``write`` (``path``, base64 ``data``) answers ``{"file": {"path", "size", "modified"}}``,
  ``read`` (``path``, ``offset``) at most `FILE_CHUNK_BYTES` as ``{"data", "size"}`` (the
  file's whole size), ``list`` ``{"files": [...], "truncated"}``; on a fork server,
  ``copy_from`` (``from``: another session's key) copies that session's working directory into
  this one's, answering ``{"copied": n, "truncated"}``; a refusal is ``{"refused": reason,
  "error": why}``;
- a live fork's hand-over, on a fork server: ``{"id", "nonce", "snapshot_to": key}`` takes the
  session's snapshot into a memory file for session `key` (`handover.py`), answered as a cell
  (its stdout says what was left out), with an `error` when it could not be done; session
  `key` then loads it on its own, written behind the answer, and holds its next call until it
  has (if the load fails, the session ends: ``{"session": key, "gone": why}``);
- interrupt: ``{"interrupt": id}``, when call `id` runs, kills every process the cells started
  and sends SIGINT to the executor, which stops the cell and keeps its namespace; the reply then
  says ``"interrupted": true``. For any other id it does nothing;
- lease: ``{"lease": seconds}`` (no reply): from then on, a kernel that hears nothing from
  the worker (a lease, or any other line) for that long stops everything, as at EOF. A
  container whose stdin outlives its worker's attach (the docker backend, so that a planned
  exit can hand it to another worker) needs it; without one, nothing changes;
- end: stdin's EOF stops everything at once, mid-cell too. If the executor dies, the supervisor
  kills what is left and exits with the executor's status (128 + signal when it was killed).
"""

INTERRUPTED = "KeyboardInterrupt: the cell was interrupted"
OUTPUT_LIMIT = 200_000  # characters kept per stream (and for result, error) per cell
# The most characters a reply's text field may hold: OUTPUT_LIMIT and the notes saying what was
# cut or left out. The supervisor cuts a longer one, the worker refuses it.
MAX_TEXT_CHARS = OUTPUT_LIMIT + 1000
# The longest line the supervisor sends; the worker refuses longer. Room for a cell's rich
# outputs in base64 beside its text, or for one chunk of a file read.
MAX_LINE_BYTES = 4 << 20
MAX_REQUEST_BYTES = 64 << 20  # the longest request line the supervisor accepts
DISPLAY_LIMIT = 2 << 20  # bytes of rich outputs (decoded) kept per cell
DISPLAY_MAX_OUTPUTS = 16  # rich outputs kept per cell
DISPLAY_TEXT_LIMIT = 20_000  # characters of an output's text form (the model reads it)
MAX_DISPLAY_TEXT_CHARS = DISPLAY_TEXT_LIMIT + 200  # with the note on what was cut
# What a rich output may be, best first: a cell's object shows as the first it has.
DISPLAY_MIMES = ("image/png", "image/jpeg", "image/svg+xml", "text/html")
BINARY_MIMES = ("image/png", "image/jpeg")  # sent in base64
DISPLAY_KINDS = ("figure", "table", "image", "html")
FILE_CHUNK_BYTES = 2 << 20  # the most one file read returns
MAX_LISTED_FILES = 1000  # files one listing names
