"""The consumer-group scenario with kafkajs, a Node.js client (tests/js)."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.agents.groups.members import SESSION_TIMEOUT_MS
from tests.agents.groups.test_clients import create_topic

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.timeout(120)]

HERE = Path(__file__).resolve().parent
JS_DIR = HERE.parents[1] / "js"


def test_kafkajs_consumers_share_partitions_and_rebalance(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "js-orders")
    env = {**os.environ, "BOOTSTRAP": a.bootstrap, "TOPIC": "js-orders", "GROUP": "js-group"}
    done = subprocess.run(
        ["node", str(HERE / "kafkajs_group.js")],
        cwd=JS_DIR,
        env={**env, "NODE_PATH": str(JS_DIR / "node_modules")},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["join_s"] < SESSION_TIMEOUT_MS / 1000
    assert result["leave_s"] < SESSION_TIMEOUT_MS / 1000
    consumed = Counter(tuple(r) for r in result["records"])
    produced = {tuple(r) for r in result["produced"]}
    assert produced and set(consumed) >= produced
    assert [r for r, n in consumed.items() if n > 1] == []
