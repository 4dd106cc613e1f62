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


ROOT = Path(__file__).resolve().parents[1]
PG_NODES = ("pg1", "pg2", "pg3")


def test_the_metadata_database_is_three_patroni_nodes_with_etcd():
    assert "postgres" not in SERVICES  # no lone database left
    assert "etcd" in SERVICES["etcd"]["command"]
    for name in PG_NODES:
        node = SERVICES[name]
        assert node["build"]["dockerfile"] == "deploy/ha/Dockerfile"
        assert node["environment"]["PATRONI_NAME"] == name
        assert node["environment"]["PATRONI_POSTGRESQL_CONNECT_ADDRESS"] == f"{name}:5432"
        assert node["volumes"] == [f"{name}:/var/lib/postgresql/data"]  # a disk each


def test_every_floe_process_reaches_the_primary_through_all_three_hosts():
    for name in ("web", "worker", "beat"):
        url = SERVICES[name]["environment"]["DATABASE_URL"]
        hosts = url.split("@", 1)[1].split("/", 1)[0].split(",")
        assert hosts == [f"{n}:5432" for n in PG_NODES], name
        assert url.endswith("?target_session_attrs=read-write"), name


def test_patroni_replicates_synchronously_and_backs_up_to_minio():
    config = yaml.safe_load((ROOT / "deploy/ha/patroni.yml").read_text())
    dcs = config["bootstrap"]["dcs"]
    assert dcs["synchronous_mode"] is True
    parameters = dcs["postgresql"]["parameters"]
    assert parameters["archive_mode"] == "on"
    assert "barman-cloud-wal-archive" in parameters["archive_command"]
    assert "http://minio:9000" in parameters["archive_command"]
    assert parameters["archive_timeout"] == 5
    postgresql = config["postgresql"]
    assert postgresql["create_replica_methods"] == ["barman_cloud", "basebackup"]
    # Standbys only stream (a promotion never waits on the archive); a node rebuilt from
    # a backup fetches the WAL archived since into pg_wal/ itself.
    assert "restore_command" not in (postgresql.get("recovery_conf") or {})
    replica_script = (ROOT / "deploy/ha/replica_from_backup.sh").read_text()
    assert "barman-cloud-restore" in replica_script and "fetch_archived_wal" in replica_script
    for name in PG_NODES:
        env = SERVICES[name]["environment"]
        assert env["FLOE_BACKUP_ENDPOINT"] == "http://minio:9000"
        assert env["FLOE_BACKUP_URL"].startswith("s3://floe-metadata/")
    assert "local/floe-metadata" in SERVICES["minio-buckets"]["entrypoint"]


def test_patroni_accepts_the_configuration():
    """Patroni's own validator; what it checks of this machine (etcd's name resolves here,
    port 5432 is free here) is not the file's fault."""
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "PATRONI_NAME": "pg1",
        "PATRONI_RESTAPI_CONNECT_ADDRESS": "pg1:8008",
        "PATRONI_POSTGRESQL_CONNECT_ADDRESS": "pg1:5432",
        "PATRONI_SUPERUSER_PASSWORD": "x",
        "PATRONI_REPLICATION_PASSWORD": "y",
    }
    done = subprocess.run(
        [str(Path(sys.executable).parent / "patroni"), "--validate-config",
         str(ROOT / "deploy/ha/patroni.yml")],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    complaints = [
        line for line in (done.stdout + done.stderr).splitlines()
        if line.strip()
        and not line.startswith("etcd3.hosts etcd:2379 didn't pass validation")
        and not line.startswith("postgresql.listen 0.0.0.0:5432 didn't pass validation: Port")
        and not line.startswith("postgresql.bin_dir")  # a machine without PostgreSQL 15
    ]  # fmt: skip
    assert complaints == [], complaints


def test_each_patroni_node_runs_the_failure_detector_on_its_own_configuration(monkeypatch):
    """The image carries deploy/ha/failure_detector.py, the entrypoint starts it beside
    Patroni on the same patroni.yml, and it reads from that file and a node's environment
    what Patroni does: its name, the scope and etcd."""
    import runpy

    assert "deploy/ha/failure_detector.py" in (ROOT / "deploy/ha/Dockerfile").read_text()
    entrypoint = (ROOT / "deploy/ha/entrypoint.sh").read_text()
    assert "failure_detector.py /opt/floe-ha/patroni.yml &" in entrypoint
    assert "exec patroni" not in entrypoint  # the container outlives Patroni: ports refuse
    detector = runpy.run_path(str(ROOT / "deploy/ha/failure_detector.py"))
    monkeypatch.setenv("PATRONI_NAME", "pg2")
    settings = detector["patroni_settings"](str(ROOT / "deploy/ha/patroni.yml"))
    assert settings == {
        "hosts": ["etcd:2379"], "name": "pg2", "scope": "floe-metadata", "namespace": "/service/",
    }  # fmt: skip
