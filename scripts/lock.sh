#!/usr/bin/env bash
# Write the hashed locks from pyproject.toml: requirements-dev.lock (`.[service,dev]`, what
# `make` installs) and requirements.lock (`.[service]`, what the Dockerfile installs).
#
# pip-compile keeps the versions the locks already pin (pass `--upgrade-package NAME` or
# `--upgrade` to move them) and writes, for each, the sha256 of every file the indexes offer
# for that version (PyPI's, and those of the local indexes pip is configured with), so that
# `pip install --require-hashes` finds a hash for whichever file it picks. The service lock is
# constrained by the dev one: a package has the same version in both. Arguments are passed to
# both pip-compile runs. Run from the repository root with CPython 3.11 (the image's Python):
#   bash scripts/lock.sh
set -euo pipefail

PYTHON="${PYTHON:-python3.11}"
PIP_TOOLS=pip-tools==7.6.2

tools="$(mktemp -d)"
trap 'rm -rf "$tools"' EXIT
"$PYTHON" -m venv "$tools"
"$tools/bin/pip" install -q "$PIP_TOOLS"

# lock OUTPUT WHAT INSTALL [pip-compile arguments]: OUTPUT starts with a header saying what it
# holds, how it is made and how it is installed.
lock() {
    local output="$1" what="$2" install="$3"
    shift 3
    # pip-compile keeps the pins of the file it writes to: start from the current lock.
    if [[ -f "$output" ]]; then cp "$output" "$output.body"; fi
    # The project's own extras name the project (service names web): pip-compile would pin
    # taskyard itself as a `file://` URL, which no hash can cover; as "unsafe" it is left out.
    "$tools/bin/pip-compile" --quiet --generate-hashes --strip-extras --no-header \
        --annotation-style line --no-emit-index-url --no-emit-find-links \
        --unsafe-package taskyard --output-file "$output.body" "$@" pyproject.toml
    {
        echo "# $what,"
        echo "# with the sha256 of every file pip may pick for each."
        echo "# Made by \`bash scripts/lock.sh\` (pip-compile --generate-hashes, from pyproject.toml)."
        echo "# Installed by \`$install\`,"
        echo "# then the project itself by \`pip install --no-deps\`."
        echo
        # pip-compile's closing warning names taskyard only: it is installed on its own.
        sed '/^# WARNING: The following packages were not pinned/,/^# taskyard$/d' "$output.body"
    } >"$output"
    rm "$output.body"
}

lock requirements-dev.lock \
    "The exact version of every package \`pip install -e '.[service,dev]'\` installs (make)" \
    "pip install --require-hashes -r requirements-dev.lock" \
    --extra service --extra dev "$@"
lock requirements.lock \
    "The exact version of every package \`pip install '.[service]'\` installs (the image)" \
    "pip install --require-hashes -r requirements.lock" \
    --extra service --constraint requirements-dev.lock "$@"
