# The API image; the worker runs from the same image with `coppice worker`.
# `make image` builds it with docker or podman; where no registry is reachable it builds on a
# stand-in for python:3.11-slim (deploy/image.sh, docs/operations.md).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    COPPICE_DATA_DIR=/data \
    NUMBA_CACHE_DIR=/app/numba-cache

RUN useradd --system --uid 10001 --home-dir /app --no-create-home coppice \
    && mkdir /data \
    && chown coppice:coppice /data

# The sources are copied to /src only to be installed, then removed: the server imports the
# installed package, and Numba keys its on-disk cache by the kernels' source paths, so the
# warm-up below must compile that same package (run from /app it imported the copies and
# filled a cache the server never looked up: every fresh container recompiled on its first
# predict and fit).
WORKDIR /src
COPY pyproject.toml README.md ./
# The `coppice` command itself lives in coppice/ (its serve, worker and migrate go to service).
COPY coppice ./coppice
COPY engine ./engine
COPY service ./service
COPY migrations ./migrations
# dask: the same image runs the optional Dask scheduler and workers (docker-compose.yml).
RUN pip install '.[service,dask]' && rm -rf /src

WORKDIR /app
# Compile the engine's and the service's kernels now, into NUMBA_CACHE_DIR (the installed package is read-only
# at run time): the first fit in a container then loads machine code instead of compiling it
# for a minute. The cache stays writable for any signature the warm-up did not meet.
RUN python -m service.warmup && chown -R coppice:coppice /app/numba-cache

USER coppice
# Only the default SQLite database lives here; with PostgreSQL nothing durable does.
VOLUME ["/data"]
EXPOSE 8000

# python:3.11-slim has no curl; the standard library's urlopen fails on any non-2xx answer.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/v2/health/ready', timeout=4)"]

CMD ["coppice", "serve", "--host", "0.0.0.0", "--port", "8000"]
