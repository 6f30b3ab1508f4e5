# syntax=docker/dockerfile:1
# Switchboard: a two-stage image. The build stage makes a wheel-only virtualenv;
# the runtime stage copies it onto a slim base and runs as an unprivileged user.
#
# Build and run (from the repository root):
#   docker build -t switchboard .
#   docker run -d --name switchboard --env-file deploy/.env -v switchboard-data:/data switchboard
# Any other command runs in place of `run`, e.g.
#   `docker run --rm --env-file deploy/.env -v switchboard-data:/data switchboard doctor`.
# deploy/docker-compose.yml uses the same image and volume names.
#
# The base is pinned to a patch release; for fully reproducible builds pin its digest too:
#   docker buildx imagetools inspect python:3.11.11-slim-bookworm   (copy the Digest, then FROM ...@sha256:<digest>)

FROM python:3.11.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY adapters ./adapters
COPY agent ./agent
COPY config ./config
COPY gateway ./gateway
COPY storage ./storage
RUN python -m venv /opt/switchboard \
 && /opt/switchboard/bin/pip install --no-compile .

FROM python:3.11.11-slim-bookworm AS runtime
RUN groupadd --system --gid 10001 switchboard \
 && useradd --system --uid 10001 --gid switchboard --home-dir /data --shell /usr/sbin/nologin switchboard \
 && mkdir -p /data/media /data/memories && chown -R switchboard:switchboard /data && chmod -R 0700 /data
COPY --from=build /opt/switchboard /opt/switchboard
ENV PATH=/opt/switchboard/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SWITCHBOARD_HOME=/data
# media/ and memories/ exist in the image so that a volume of their own mounted there (the replicas of
# deploy/docker-compose.cluster.yml share theirs) starts owned by the switchboard user, as /data does.
# The switchboard user created above, by number so Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
# /health listens on 127.0.0.1:8642 inside the container by default (health: in config.yaml).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8642/health', timeout=4).status == 200 else 1)"]
# Logs go to /data/logs/gateway.log and, with logging.console (the default), to stderr for `docker logs`.
ENTRYPOINT ["switchboard"]
CMD ["run"]
