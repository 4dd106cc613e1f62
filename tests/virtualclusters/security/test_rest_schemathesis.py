"""Schemathesis against the REST API's OpenAPI schema, in process (the Django WSGI app in
this test's database transaction), with every check: no server error, and the API keeps
its word: documented status codes and content types, responses that fit their schemas,
schema-valid requests accepted and schema-violating ones refused (positive and negative
generation), deleted things gone. The stateful phase (calls chained through the ids
and Location headers one answer gives the next) runs over HTTP, in
test_rest_schemathesis_cli.py and `make fuzz`: in process, Hypothesis replays its state
machine against a database that moved on, and calls the run flaky.

Requests carry a valid admin key of a tenant that owns a cluster with a SASL user and an
ACL, and `cluster_id` path parameters point at that cluster, so generated bodies reach
the services rather than a 404. Bounded: a few examples per operation.

"""

from __future__ import annotations

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings

from tests.virtualclusters.security.fuzz_tenant import make_fuzz_tenant

schemathesis = pytest.importorskip("schemathesis")
from schemathesis import GenerationMode  # noqa: E402

pytestmark = [pytest.mark.timeout(300), pytest.mark.filterwarnings("ignore")]


@pytest.fixture(autouse=True)
def keep_connections_open():
    """DB connections stay open across the app's requests (as Django's test client
    arranges), so the test's transaction survives them."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def tenant(db):
    return make_fuzz_tenant("schemathesis-co")


def _load_schema():
    from controlplane.wsgi import application

    loaded = schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", application)
    # Unknown query parameters are ignored, as HTTP APIs do; the key is always sent.
    loaded.config.generation.update(
        modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
        allow_extra_parameters=True,
        with_security_parameters=False,
    )
    return loaded


schema = _load_schema()


@schema.parametrize()
@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
def test_the_rest_api_keeps_its_word(case, tenant):
    if case.path_parameters and "cluster_id" in case.path_parameters:
        case.path_parameters["cluster_id"] = tenant["cluster"].public_id
    case.call_and_validate(headers={"Authorization": f"Bearer {tenant['key']}"})
