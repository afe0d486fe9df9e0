#!/usr/bin/env bash
# What `make up` and `make test` need, checked before anything is installed: each missing piece
# stops the command with one line saying what to do (not a traceback, not a half-made venv).
#   bash scripts/preflight.sh PYTHON
set -euo pipefail

PYTHON="${1:-python3}"

fail() { echo "taskyard: $*" >&2; exit 1; }

[[ $(uname -s) == Linux ]] ||
    fail "make up/test run on Linux (Debian 12); elsewhere use compose.dev.yaml (README, 'What you need')"

command -v "$PYTHON" >/dev/null || fail "$PYTHON not found: apt-get install python3 python3-venv (or make ... PYTHON=python3.11)"
version="$("$PYTHON" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
"$PYTHON" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 13)))' ||
    fail "$PYTHON is $version; taskyard needs Python 3.11 or 3.12 (make ... PYTHON=python3.11)"
"$PYTHON" -c 'import ensurepip, venv' 2>/dev/null ||
    fail "$PYTHON $version cannot make a virtualenv: apt-get install python3-venv"

# Debian packages are installed only where missing; starting dockerd needs root either way.
missing=()
for command in redis-server redis-sentinel dockerd debootstrap bwrap curl chromium; do
    command -v "$command" >/dev/null || missing+=("$command")
done
if [[ $(id -u) != 0 ]]; then
    if ((${#missing[@]})); then
        fail "not root, and ${missing[*]} missing: run as root (sudo make ...), or see README 'What you need' for the route without root"
    fi
    docker info >/dev/null 2>&1 ||
        fail "not root and no Docker engine answers: run as root (sudo make ...) so it can start dockerd"
fi
if ((${#missing[@]})) && ! command -v apt-get >/dev/null; then
    fail "${missing[*]} missing and no apt-get here: install them with your package manager, or use compose (README)"
fi

# The venv, the sandbox image's base and Docker's layers: about 3 GB.
free_kb="$(df -Pk . | awk 'NR == 2 { print $4 }')"
((free_kb > 3 * 1024 * 1024)) ||
    fail "$((free_kb / 1024)) MB free here; make up/test need about 3 GB"
exit 0
