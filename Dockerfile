# One image for every taskyard service; compose.yaml picks the command per service.
# Locally (no registry) build with --build-arg BASE=taskyard/base:bookworm plus python3-venv.
ARG BASE=python:3.11-slim
FROM ${BASE}
WORKDIR /app
# The locked packages first, each checked against its hashes (a layer code changes keep);
# then taskyard itself, which adds none. --no-deps: the lock is complete, so pip resolves
# nothing against the index (an extra such as `lxml[html_clean]>=4.4.2` would otherwise be
# resolved outside the pins, and --require-hashes would refuse the build).
COPY requirements.lock ./
RUN pip install --no-cache-dir --no-deps --require-hashes -r requirements.lock \
    && pip check
COPY pyproject.toml ./
COPY shared ./shared
COPY services ./services
RUN pip install --no-cache-dir --no-deps . \
    && useradd --system --uid 10001 taskyard
# The package installs taskyard alone; the services run from this checkout copy.
ENV PYTHONPATH=/app
USER 10001
EXPOSE 8000 8400
CMD ["uvicorn", "services.gateway.app:app", "--host", "0.0.0.0", "--port", "8000"]
