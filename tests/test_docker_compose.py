"""docker-compose.yml keeps the BYOC split: jobs run on a jobs-role agent, and only the
agents hold the bucket and its credentials."""

from __future__ import annotations

from pathlib import Path

import yaml

SERVICES = yaml.safe_load((Path(__file__).resolve().parents[1] / "docker-compose.yml").read_text())[
    "services"
]


def test_a_jobs_role_agent_runs_the_jobs_and_the_others_serve_clients():
    roles = {
        name: s["command"].split("--roles ", 1)[1].split()[0]
        for name, s in SERVICES.items()
        if "floe-agent" in str(s.get("command"))
    }
    assert roles == {
        "agent-1": "produce,consume,schema-registry",
        "agent-2": "produce,consume,schema-registry",
        "agent-jobs": "jobs",
    }


def test_the_control_plane_has_no_bucket_and_no_credentials():
    for name in ("web", "worker", "beat"):
        env = SERVICES[name]["environment"]
        assert not [k for k in env if k.startswith("AWS_") or k == "FLOE_BUCKET_URL"], name
