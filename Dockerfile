FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless gcc make \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY core core
COPY controlplane controlplane
COPY tenancy tenancy
COPY team team
COPY metadata_store metadata_store
COPY virtualclusters virtualclusters
COPY billing billing
COPY agents agents
COPY jobs jobs
COPY floecli floecli
COPY schema_registry schema_registry
COPY templates templates
COPY manage.py ./
# Static files are collected at build time and served by the web process (WhiteNoise).
# collectstatic touches no database: the URLs below only let the settings load. A failure
# fails the build.
ENV STATIC_ROOT=/app/static
RUN pip install --no-cache-dir . \
    && DATABASE_URL=postgres://build@127.0.0.1/build REDIS_URL=redis://127.0.0.1/0 \
       SECRET_KEY=build-only-not-a-secret-build-only-not-a-secret \
       python manage.py collectstatic --noinput
EXPOSE 8000 9092
