#!/usr/bin/env bash
# Build the sandbox image (taskyard/sandbox:latest) idempotently.
#
# Without a registry, the base image is made locally: debootstrap a minimal Debian bookworm
# from the archive apt already uses, install the sandbox's Debian packages into it with apt,
# then `docker import` it as taskyard/base:bookworm. With SANDBOX_BASE (production:
# python:3.11-slim) the Dockerfile installs the same packages on top of that base instead.
# Each step is skipped when its result exists: the base by name, the sandbox image by a label
# holding the hash of its inputs (Dockerfile, the kernel package, base image id); the local
# base by a label naming its packages.
#
# Environment: SANDBOX_IMAGE, SANDBOX_BASE (an existing base image, e.g. python:3.11-slim,
# skips debootstrap), SANDBOX_LOCAL_BASE (the tag debootstrap's image gets),
# SANDBOX_PACKAGES (the Debian packages the sandbox's Python gets, comma-separated).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONTEXT="$ROOT/shared/taskyard/sandbox"
DOCKERFILE="$CONTEXT/image/Dockerfile"
IMAGE="${SANDBOX_IMAGE:-taskyard/sandbox:latest}"
LOCAL_BASE="${SANDBOX_LOCAL_BASE:-taskyard/base:bookworm}"
BASE="${SANDBOX_BASE:-$LOCAL_BASE}"
# python3-munkres satisfies python3-fonttools' "python3-scipy | python3-munkres" (a matplotlib
# dependency) without scipy, whose build-time dependencies (gcc, boost) would triple the image.
PACKAGES="${SANDBOX_PACKAGES:-python3,python3-numpy,python3-pandas,python3-matplotlib,python3-munkres,python3-cloudpickle}"

log() { echo "build_sandbox_image: $*" >&2; }

# The archive address comes from this machine's apt sources, never from the repository.
archive_url() {
    local sources=/etc/apt/sources.list.d/debian.sources
    if [[ -f $sources ]]; then
        awk 'BEGIN { RS = ""; FS = "\n" }
             /(^|\n)Suites:([^\n]* )?bookworm( |\n|$)/ {
                 for (i = 1; i <= NF; i++) if ($i ~ /^URIs:/) { split($i, f, " "); print f[2]; exit }
             }' "$sources"
    elif [[ -f /etc/apt/sources.list ]]; then
        awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list
    fi
}

build_local_base() {
    local current
    current="$(docker image inspect "$LOCAL_BASE" \
        --format '{{ index .Config.Labels "taskyard.packages" }}' 2>/dev/null || true)"
    if [[ $current == "$PACKAGES" ]]; then
        log "$LOCAL_BASE exists with $PACKAGES; skipping debootstrap"
        return
    fi
    command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y debootstrap; }
    local archive rootfs
    archive="$(archive_url)"
    [[ -n $archive ]] || { log "no bookworm archive found in apt sources"; exit 1; }
    rootfs="$(mktemp -d /tmp/taskyard-rootfs.XXXXXX)"
    # shellcheck disable=SC2064 # expand now: the local is gone when the trap runs
    trap "rm -rf '$rootfs'" EXIT
    log "debootstrap bookworm into $rootfs, then apt-get install $PACKAGES"
    debootstrap --variant=minbase bookworm "$rootfs" "$archive" >&2
    # apt, not debootstrap's --include: debootstrap takes the first of alternative
    # dependencies, apt takes one that the install already satisfies (see PACKAGES).
    cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
    DEBIAN_FRONTEND=noninteractive chroot "$rootfs" \
        apt-get install -y -qq --no-install-recommends ${PACKAGES//,/ } >&2
    rm -f "$rootfs/etc/resolv.conf"
    # Package caches, lists and documentation only make the image bigger.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
        "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/*
    tar -C "$rootfs" -c . |
        docker import --change "LABEL taskyard.packages=$PACKAGES" - "$LOCAL_BASE" >/dev/null
    log "imported $LOCAL_BASE"
}

inputs_hash() {
    local base_id
    base_id="$(docker image inspect "$BASE" --format '{{ .Id }}' 2>/dev/null || echo "$BASE")"
    { cat "$DOCKERFILE" "$CONTEXT/.dockerignore"
      find "$CONTEXT/kernel" -name '*.py' | LC_ALL=C sort | xargs cat
      echo "$base_id $(base_packages)"; } | sha256sum | cut -c1-16
}

# What the Dockerfile installs: nothing on the local base (it has the packages already).
base_packages() {
    [[ $BASE == "$LOCAL_BASE" ]] || echo "${PACKAGES//,/ }"
}

main() {
    local hash current old
    docker info >/dev/null 2>&1 || "$ROOT/scripts/setup_docker.sh"
    [[ $BASE == "$LOCAL_BASE" ]] && build_local_base
    hash="$(inputs_hash)"
    current="$(docker image inspect "$IMAGE" \
        --format '{{ index .Config.Labels "taskyard.inputs" }}' 2>/dev/null || true)"
    if [[ $current == "$hash" ]]; then
        log "$IMAGE is up to date (inputs $hash)"
        return
    fi
    log "building $IMAGE from $BASE (inputs $hash)"
    old="$(docker image inspect "$IMAGE" --format '{{ .Id }}' 2>/dev/null || true)"
    docker build --quiet --build-arg "BASE=$BASE" --build-arg "PACKAGES=$(base_packages)" \
        --label "taskyard.inputs=$hash" \
        -t "$IMAGE" -f "$DOCKERFILE" "$CONTEXT" >&2
    # The previous build, if no tag names it any more, is garbage; a container using it keeps it.
    if [[ -n $old && $(docker image inspect "$old" --format '{{ len .RepoTags }}') == 0 ]]; then
        docker image rm "$old" >/dev/null 2>&1 || true
    fi
}

main "$@"
