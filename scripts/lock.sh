#!/usr/bin/env bash
# Write the hashed locks from pyproject.toml: requirements-dev.lock (`.[service,dev]`, what
# `make` installs) and requirements.lock (`.[service]`, what the Dockerfile installs).
#
# uv's universal resolver writes one lock for every interpreter `requires-python` admits and
# every platform `[tool.uv] environments` names: a package that only some of them need (redis
# needs async-timeout below Python 3.11.3) is pinned with its environment marker, so the lock
# does not depend on the Python that made it (pip-compile's did). uv keeps the versions the
# locks already pin (pass `--upgrade-package NAME` or `--upgrade` to move them) and writes the
# sha256 of every file the index offers for each version, so `pip install --require-hashes`
# finds a hash for whichever file it picks. The service lock is constrained by the dev one: a
# package has the same version in both. Arguments are passed to both runs. From the root:
#   bash scripts/lock.sh
set -euo pipefail

PYTHON="${PYTHON:-python3}"
UV=uv==0.13.9

tools="$(mktemp -d)"
trap 'rm -rf "$tools"' EXIT
"$PYTHON" -m venv "$tools"
"$tools/bin/pip" install -q "$UV"

# lock OUTPUT WHAT INSTALL [uv pip compile arguments]: OUTPUT starts with a header saying what
# it holds, how it is made and how it is installed.
lock() {
    local output="$1" what="$2" install="$3"
    shift 3
    # uv keeps the pins of the file it writes to: start from the current lock.
    if [[ -f "$output" ]]; then cp "$output" "$output.body"; fi
    # The project's own extras name the project (service names web): taskyard itself is
    # installed on its own, with --no-deps, so it stays out of the lock.
    "$tools/bin/uv" pip compile --quiet --universal --python-version 3.11 --generate-hashes \
        --no-header --annotation-style line --no-emit-package taskyard \
        --output-file "$output.body" "$@" pyproject.toml
    {
        echo "# $what,"
        echo "# on every Python and platform pyproject.toml admits (markers say where an entry applies),"
        echo "# with the sha256 of every file pip may pick for each."
        echo "# Made by \`bash scripts/lock.sh\` (uv pip compile --universal --generate-hashes)."
        echo "# Installed by \`$install\`,"
        echo "# then the project itself by \`pip install --no-deps\`."
        echo
        cat "$output.body"
    } >"$output"
    rm "$output.body"
}

lock requirements-dev.lock \
    "The exact version of every package \`pip install -e '.[service,dev]'\` installs (make)" \
    "pip install --no-deps --require-hashes -r requirements-dev.lock" \
    --extra service --extra dev "$@"
lock requirements.lock \
    "The exact version of every package \`pip install '.[service]'\` installs (the image)" \
    "pip install --no-deps --require-hashes -r requirements.lock" \
    --extra service --constraint requirements-dev.lock "$@"
