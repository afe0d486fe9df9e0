#!/usr/bin/env bash
# Debian packages the stack and the tests need: Redis, Docker's engine, debootstrap (the
# sandbox's local base image) and bubblewrap (the local sandbox). Idempotent.
set -euo pipefail

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v bwrap >/dev/null || need+=(bubblewrap)
if ((${#need[@]})); then
    echo "install_system_deps: apt-get install ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
