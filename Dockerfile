FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless gcc make \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY core core
COPY controlplane controlplane
COPY metadata_store metadata_store
COPY virtualclusters virtualclusters
COPY billing billing
COPY agents agents
COPY jobs jobs
COPY templates templates
COPY manage.py ./
RUN pip install --no-cache-dir . && python manage.py collectstatic --noinput || true
EXPOSE 8000 9092
