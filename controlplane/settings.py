"""Django settings, read from the environment (see README "Configuration")."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from controlplane.embedded import data_dir_from_env, postgres_url, redis_url
from controlplane.env import database_from_url, env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
FLOE_DATA_DIR = data_dir_from_env(BASE_DIR)

DEBUG = env_bool("DEBUG", False)
TESTING = "PYTEST_VERSION" in os.environ


def _secret_key() -> str:
    key = env_str("SECRET_KEY")
    if key:
        if len(key) < 32 and not DEBUG:
            raise ImproperlyConfigured("SECRET_KEY must be at least 32 characters")
        return key
    if not (DEBUG or TESTING):
        raise ImproperlyConfigured("SECRET_KEY must be set (or DEBUG=1 for a local playground)")
    # Development only: one random key per data folder, so sessions survive restarts.
    path = FLOE_DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list(
    "ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"] if DEBUG or TESTING else []
)
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])


def _metrics_token() -> str | None:
    """The bearer token `/metrics` asks of its scraper (its series name every organization's
    clusters and tables); unset, `/metrics` is off."""
    token = env_str("FLOE_METRICS_TOKEN") or None
    if token is not None and len(token) < 32:
        raise ImproperlyConfigured("FLOE_METRICS_TOKEN must be at least 32 characters")
    return token


FLOE_METRICS_TOKEN = _metrics_token()

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "tenancy",
    "team",
    "controlplane",
    "virtualclusters",
    "metadata_store",
    "billing",
    "schema_registry",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "controlplane.metrics.RequestMetricsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "team.audit.AuditActorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "tenancy.console.scope.RolePermissions",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "controlplane.urls"
WSGI_APPLICATION = "controlplane.wsgi.application"
ASGI_APPLICATION = "controlplane.asgi.application"  # what the web server runs

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "tenancy.console.context.console",
                "billing.context_processors.usage_banners",
            ],
        },
    },
]

# One database engine everywhere: PostgreSQL. No DATABASE_URL → the embedded server.
_database_url = env_str("DATABASE_URL") or postgres_url(FLOE_DATA_DIR)
DATABASES = {"default": database_from_url(_database_url)}
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# The metadata store is OLTP: short statements over indexes. PostgreSQL's JIT compiles any
# plan whose estimate crosses jit_above_cost — the fetch plan's per-partition LATERAL does —
# and spends ~12 ms compiling a 3 ms query: off for the control plane's sessions.
DATABASES["default"]["OPTIONS"].setdefault("options", "-c jit=off")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL") or redis_url(FLOE_DATA_DIR)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 10},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
if TESTING:
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "templates" / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT") or FLOE_DATA_DIR / "static")
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# The web process serves its own static files (WhiteNoise), DEBUG or not: from
# STATIC_ROOT after `collectstatic` (the Docker image), else straight from the apps.
WHITENOISE_USE_FINDERS = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["team.api.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["team.api.auth.ApiKeyPermission"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "controlplane.api.errors.exception_handler",
    # JSON only: one encoding whose types the schema can state (a form's "0" is not false).
    "DEFAULT_PARSER_CLASSES": ["controlplane.api.parsers.JSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Floe control plane API",
    "DESCRIPTION": "Virtual clusters, keys and configuration. Authenticate with "
    "`Authorization: Bearer <api key>`.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "TeamRoleEnum": "team.api.views.TEAM_ROLES",
        "RoleEnum": "tenancy.models.Membership.Role",
        "InvoiceKindEnum": "billing.models.Invoice.Kind",
        "CompatibilityEnum": "schema_registry.models.COMPATIBILITY_LEVELS",
        "PipelineStateEnum": "virtualclusters.api.pipelines_views.STATES",
        "PipelineAgentStateEnum": "virtualclusters.api.pipelines_views.AGENT_STATES",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "controlplane.api.schema.document_errors",
    ],
}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Redis is not a store of record (beat's checks are repeated and every task is safe to run
# twice): a worker that lost it retries for as long as it takes — Celery's default gives
# up and exits after 100 tries — with each call on the broker bounded in time.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": 2,
    "socket_timeout": 10,  # above the transport's 1 s BRPOP
    "socket_keepalive": True,
}
CELERY_TIMEZONE = "UTC"

# The URL agents use to reach this control plane (shown in the agent command).
FLOE_PUBLIC_URL: str = env_str(
    "FLOE_PUBLIC_URL", "http://127.0.0.1:" + str(env_int("FLOE_HTTP_PORT", 8000))
)
# An agent is live when it heartbeated within this many seconds.
FLOE_AGENT_LIVENESS_S = env_int("FLOE_AGENT_LIVENESS_S", 15, minimum=1)
# Bounds on the agent API's database work: a statement runs at most this long, and waits
# at most this long for a lock, then the call answers 503 and the agent retries. Both stay
# under the agent's commit timeout (10 s), so the agent learns the outcome.
FLOE_AGENT_API_STATEMENT_TIMEOUT_MS = env_int(
    "FLOE_AGENT_API_STATEMENT_TIMEOUT_MS", 8000, minimum=100
)
FLOE_AGENT_API_LOCK_TIMEOUT_MS = env_int("FLOE_AGENT_API_LOCK_TIMEOUT_MS", 3000, minimum=100)
# The web server (controlplane.asgi): threads answering agent-API calls other than commits,
# connections of its commit pool (one group in the database per cluster at a time), and
# threads serving the console and the REST API.
FLOE_AGENT_API_THREADS = env_int("FLOE_AGENT_API_THREADS", 16, minimum=1)
FLOE_AGENT_API_COMMIT_CONNECTIONS = env_int("FLOE_AGENT_API_COMMIT_CONNECTIONS", 4, minimum=1)
FLOE_WEB_THREADS = env_int("FLOE_WEB_THREADS", 16, minimum=1)
# The browse channel (virtualclusters.browsing): an agent's long-poll returns after this
# many idle seconds (the agent polls again), and the console waits at most this many
# for an agent's answer.
FLOE_BROWSE_POLL_S = env_int("FLOE_BROWSE_POLL_S", 25, minimum=1)
FLOE_BROWSE_WAIT_S = env_int("FLOE_BROWSE_WAIT_S", 5, minimum=1)

# Invitations are emailed through this backend (SMTP: EMAIL_HOST, EMAIL_PORT,
# EMAIL_HOST_USER, EMAIL_HOST_PASSWORD, EMAIL_USE_TLS); the console shows the link too.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "floe@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
SPECTACULAR_SETTINGS.update(
    {"SWAGGER_UI_DIST": "SIDECAR", "SWAGGER_UI_FAVICON_HREF": "SIDECAR", "REDOC_DIST": "SIDECAR"}
)

# --- background jobs: compaction, retention, orphan cleanup, key compaction -------------
# (virtualclusters/jobs/tasks.py queues them; jobs-role agents run them in the data plane,
# each on its cluster's own bucket: the control plane never needs a bucket, its
# credentials or Spark.)
# A file is deleted this long after nothing references it any more (readers may still
# hold pointers); objects no file row knows are deleted once this old.
FLOE_FILE_DELETE_GRACE_S = env_int("FLOE_FILE_DELETE_GRACE_S", 300, minimum=0)
FLOE_COMPACTION_MIN_FILES = env_int("FLOE_COMPACTION_MIN_FILES", 32, minimum=2)
FLOE_COMPACTION_TARGET_BYTES = env_int(
    "FLOE_COMPACTION_TARGET_BYTES", 128 * 1024 * 1024, minimum=64 * 1024
)
FLOE_COMPACTION_MAX_INPUT_FILES = env_int("FLOE_COMPACTION_MAX_INPUT_FILES", 2000, minimum=2)
FLOE_COMPACTION_MAX_INPUT_BYTES = env_int(
    "FLOE_COMPACTION_MAX_INPUT_BYTES", 4 * 1024**3, minimum=1024 * 1024
)
# A run still queued / running after this long is failed (lost message, dead worker).
FLOE_JOB_QUEUED_TIMEOUT_S = env_int("FLOE_JOB_QUEUED_TIMEOUT_S", 900, minimum=10)
FLOE_JOB_TIMEOUT_S = env_int("FLOE_JOB_TIMEOUT_S", 2 * 3600, minimum=60)
# After a failed run, the next run of that kind for that cluster waits this long.
FLOE_JOB_FAILURE_BACKOFF_S = env_int("FLOE_JOB_FAILURE_BACKOFF_S", 300, minimum=0)
# Finished runs, and rows of files deleted from the bucket, are forgotten after this.
FLOE_JOB_HISTORY_DAYS = env_int("FLOE_JOB_HISTORY_DAYS", 14, minimum=1)
# At most this many bytes of segment runs per topic table in one append.
FLOE_TABLE_APPEND_MAX_BYTES = env_int("FLOE_TABLE_APPEND_MAX_BYTES", 1024**3, minimum=1024 * 1024)
# Table maintenance after each append: a partition with more data files than this under
# the target size is compacted into target-sized files.
FLOE_TABLE_MAX_SMALL_FILES = env_int("FLOE_TABLE_MAX_SMALL_FILES", 10, minimum=1)
FLOE_TABLE_TARGET_FILE_BYTES = env_int("FLOE_TABLE_TARGET_FILE_BYTES", 128 * 1024**2, minimum=1024)
# Snapshot expiry and the sweep of uncommitted files read every snapshot's manifests: at
# most once per this many seconds per table.
FLOE_TABLE_SWEEP_S = env_int("FLOE_TABLE_SWEEP_S", 3600, minimum=0)
CELERY_BEAT_SCHEDULE = {
    f"floe-{kind.replace('_', '-')}-check": {
        "task": "virtualclusters.jobs.tasks.jobs_check",
        "schedule": float(env_int(f"FLOE_{kind.upper()}_CHECK_S", every, minimum=1)),
        "args": (kind,),
    }
    for kind, every in (
        ("compaction", 30),
        ("retention", 300),
        ("key_compaction", 600),
        ("orphan_cleanup", 3600),
        # Each topic table waits its own freshness_seconds between appends.
        ("table_append", 10),
    )
}
# Billing: the meters run every FLOE_BILLING_METER_S (files younger than
# FLOE_BILLING_METER_LAG_S wait for the next run); last month's invoices are issued once it
# has been closed for FLOE_BILLING_INVOICE_DELAY_S.
FLOE_BILLING_METER_S = env_int("FLOE_BILLING_METER_S", 60, minimum=1)
FLOE_BILLING_METER_LAG_S = env_int("FLOE_BILLING_METER_LAG_S", 30, minimum=0)
# Per-topic storage reads the whole index: sampled this often (cluster totals every run).
FLOE_BILLING_TOPIC_SAMPLE_S = env_int("FLOE_BILLING_TOPIC_SAMPLE_S", 900, minimum=1)
FLOE_BILLING_INVOICE_DELAY_S = env_int("FLOE_BILLING_INVOICE_DELAY_S", 2 * 3600, minimum=0)
# What the heartbeat asks whether an organization may still produce (the metadata store
# sits below billing: it is told where the check is, it does not import it).
FLOE_PRODUCE_QUOTA_CHECK = "billing.quotas.produce_quota_exceeded"
CELERY_BEAT_SCHEDULE["floe-billing-meters"] = {
    "task": "billing.tasks.meters_run",
    "schedule": float(FLOE_BILLING_METER_S),
}
CELERY_BEAT_SCHEDULE["floe-billing-invoices"] = {
    "task": "billing.tasks.invoices_issue",
    "schedule": 3600.0,
}
# Throughput history (console charts): a sample a minute, kept this many days.
FLOE_THROUGHPUT_RETENTION_DAYS = env_int("FLOE_THROUGHPUT_RETENTION_DAYS", 8, minimum=1)
CELERY_BEAT_SCHEDULE["floe-throughput-sample"] = {
    "task": "virtualclusters.throughput.tasks.throughput_sample_all",
    "schedule": 60.0,
}
CELERY_BEAT_SCHEDULE["floe-history-prune"] = {
    "task": "virtualclusters.jobs.tasks.history_prune",
    "schedule": 24 * 3600.0,
}
# KIP-98: transactions open past their transaction.timeout.ms are aborted this often.
CELERY_BEAT_SCHEDULE["floe-transactions-expire"] = {
    "task": "metadata_store.tasks.transactions_expire",
    "schedule": float(env_int("FLOE_TXN_TIMEOUT_CHECK_S", 10, minimum=1)),
}
CELERY_BEAT_SCHEDULE["floe-txn-markers-prune"] = {
    "task": "metadata_store.tasks.txn_markers_prune",
    "schedule": 3600.0,
}
