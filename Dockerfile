# `gem serve` in a container: the database lives in the volume /data, the server listens on
# 0.0.0.0:8765 as an unprivileged user, and the health check asks /v1/health.
#
#   docker build -t gem .
#   docker run -d --name gem -p 127.0.0.1:8765:8765 -v gem-data:/data gem
#
# Arguments after the image name are appended to `gem serve`'s: mount a keys file and pass
# `--keys /keys/keys.json` (see README.md, "Run it in a container"). tests/test_container.py
# runs this file's ENTRYPOINT and HEALTHCHECK as written, and builds the image when a
# container runtime is present.

# The build stage installs gem and its server extra into a virtual environment; the
# final image gets only that environment, not the sources or pip's build tools.
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gem ./gem
COPY grammar ./grammar
COPY policies ./policies
RUN python -m venv /opt/gem && /opt/gem/bin/pip install '.[server]'

FROM python:3.11-slim-bookworm
ENV PATH=/opt/gem/bin:$PATH PYTHONUNBUFFERED=1
COPY --from=build /opt/gem /opt/gem
# A fixed uid, so a bind-mounted directory can be given to it (`chown 10001 DIR`). /data is
# made and owned here before VOLUME: a new named volume starts as a copy of it, owner included.
RUN useradd --uid 10001 --user-group --create-home --shell /usr/sbin/nologin gem \
    && mkdir /data && chown gem:gem /data
USER gem
WORKDIR /home/gem
VOLUME /data
EXPOSE 8765
# slim has no curl: python's urllib. A 503 (opening the database, waiting for its lock) raises,
# so the container is healthy only once the memory is open.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/v1/health', timeout=8)"]
# Exec form: gem is PID 1 and gets `docker stop`'s SIGTERM itself; it finishes the running
# call and closes the database before it exits. Without --keys it warns that anyone who
# reaches the port can read and change the memory: publish it on 127.0.0.1 or pass --keys.
ENTRYPOINT ["gem", "serve", "/data/memory.db", "--create", "--host", "0.0.0.0", "--port", "8765"]
CMD []
