# One image for every taskyard service; compose.yaml picks the command per service.
# Locally (no registry) build with --build-arg BASE=taskyard/base:bookworm plus python3-venv.
ARG BASE=python:3.11-slim
FROM ${BASE}
WORKDIR /app
# The locked packages first, each checked against its hashes (a layer code changes keep);
# then taskyard itself, which adds none.
COPY requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements.lock
COPY pyproject.toml ./
COPY shared ./shared
COPY services ./services
RUN pip install --no-cache-dir --no-deps . \
    && useradd --system --uid 10001 taskyard
USER 10001
EXPOSE 8000 8400
CMD ["uvicorn", "services.gateway.app:app", "--host", "0.0.0.0", "--port", "8000"]
