#!/usr/bin/env bash
# Debian packages the stack and the tests need: Redis and Redis Sentinel (the failover test),
# Docker's engine, gVisor's runsc (the sandboxes' optional runtime,
# TASKYARD_SANDBOX_RUNTIME=runsc), debootstrap (the sandbox's local base image), bubblewrap
# (the local sandbox) and python3-cloudpickle for its interpreter (a live session's fork copies
# the functions and classes cells defined by value: kernel/snapshot.py), curl (the README's examples, which the tests run), iproute2 (the hosts
# test's namespaces and bridge), Chromium with a font (the dashboard's browser tests drive
# Debian's chromium through Playwright) and Docker Compose v2 (the tests resolve the compose
# files with it). Idempotent.
set -euo pipefail

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-sentinel >/dev/null || need+=(redis-sentinel)
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v bwrap >/dev/null || need+=(bubblewrap)
/usr/bin/python3 -c 'import cloudpickle' 2>/dev/null || need+=(python3-cloudpickle)
command -v curl >/dev/null || need+=(curl)  # the README's examples (tests run them)
command -v ip >/dev/null || need+=(iproute2)  # several hosts on one machine (devstack/hosts.py)
browser=()
command -v chromium >/dev/null || browser=(chromium fonts-liberation)
runsc=()
command -v runsc >/dev/null || runsc=(runsc)
if ((${#need[@]} + ${#browser[@]} + ${#runsc[@]})); then
    echo "install_system_deps: apt-get install ${need[*]} ${browser[*]} ${runsc[*]}" >&2
    apt-get update -qq
fi
if ((${#need[@]})); then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
# gVisor, optional: the sandboxes run under runc without it (and the gVisor tests assert the
# refusal); Debian ships it for amd64 and arm64 only.
if ((${#runsc[@]})); then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null ||
        echo "install_system_deps: no runsc here (TASKYARD_SANDBOX_RUNTIME=runsc will refuse)" >&2
fi
if ((${#browser[@]})); then
    # Without recommends: chromium's would bring printing and desktop services.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${browser[@]}" >/dev/null
fi

# Compose v2 (`docker compose`): Debian 12 has only the retired v1. Debian 13's package holds
# one static binary; apt fetches it (checking the archive's signatures) from the same mirror
# this machine uses, and the binary goes where the docker CLI looks for plugins.
compose_v2() {
    local sources=/etc/apt/sources.list.d/debian.sources archive work
    archive="$(awk '/^URIs:/ { print $2; exit }' "$sources" 2>/dev/null || true)"
    [[ -n $archive ]] || archive="$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list)"
    work="$(mktemp -d)"
    mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $archive trixie main" \
        >"$work/trixie.list"
    local options=(-o "Dir::Etc::SourceList=$work/trixie.list" -o Dir::Etc::SourceParts=/dev/null
                   -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
                   -o APT::Sandbox::User=root)
    echo "install_system_deps: docker compose v2 from Debian 13's docker-compose package" >&2
    apt-get "${options[@]}" update -qq
    (cd "$work" && apt-get "${options[@]}" download -qq docker-compose)
    dpkg -x "$work"/docker-compose_*.deb "$work/root"
    install -D -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-compose" \
        /usr/local/lib/docker/cli-plugins/docker-compose
    rm -rf "$work"
}
docker compose version >/dev/null 2>&1 || compose_v2
