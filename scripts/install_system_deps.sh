#!/usr/bin/env bash
# Debian packages the stack and the tests need: Redis, Docker's engine, debootstrap (the
# sandbox's local base image), bubblewrap (the local sandbox) and Chromium with a font (the
# dashboard's browser tests drive Debian's chromium through Playwright). Idempotent.
set -euo pipefail

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v bwrap >/dev/null || need+=(bubblewrap)
browser=()
command -v chromium >/dev/null || browser=(chromium fonts-liberation)
if ((${#need[@]} + ${#browser[@]})); then
    echo "install_system_deps: apt-get install ${need[*]} ${browser[*]}" >&2
    apt-get update -qq
fi
if ((${#need[@]})); then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ((${#browser[@]})); then
    # Without recommends: chromium's would bring printing and desktop services.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${browser[@]}" >/dev/null
fi
