"""The import-linter contracts (pyproject.toml, run by `make lint`) hold, and they are
not vacuous: a forbidden import planted in a copy of the tree breaks them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = (
    "core",
    "floecli",
    "agents",
    "jobs",
    "metadata_store",
    "virtualclusters",
    "billing",
    "controlplane",
    "schema_registry",
    "tenancy",
    "team",
)


def _paths() -> list[str]:
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != "."]


def _lint_imports(tree: Path) -> subprocess.CompletedProcess:
    """`lint-imports` over `tree` (its pyproject.toml, its packages first on the path)."""
    code = "import sys; from importlinter.cli import lint_imports_command; lint_imports_command()"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *_paths()])},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def tree(tmp_path):
    """A copy of the packages and pyproject.toml the contracts read."""
    for root in ROOTS:
        shutil.copytree(REPO / root, tmp_path / root, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _plant(tree: Path, module: str, line: str) -> None:
    path = tree / module
    path.write_text(path.read_text() + f"\n{line}\n")


def test_the_tree_keeps_the_contracts():
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("core/segment.py", "from django.db import connection  # noqa", "core imports no Django"),
        ("agents/topics.py", "import metadata_store.store  # noqa", "agents import only core"),
        ("virtualclusters/jobs/services.py", "import jobs.runner  # noqa", "never run Spark"),
        (
            "metadata_store/store.py",
            "import billing.quotas  # noqa",
            "each imports only those below",
        ),
        ("tenancy/models.py", "import virtualclusters.models  # noqa", "each imports only those"),
        (
            "virtualclusters/services.py",
            "import controlplane.urls  # noqa",
            "each imports only those",
        ),
        ("tenancy/ids.py", "import team.models  # noqa", "each imports only those below"),
        # The domain apps' own order: none imports one above it or beside it.
        (
            "virtualclusters/services.py",
            "import schema_registry.models  # noqa",
            "each imports only those below",
        ),
        ("team/services.py", "import virtualclusters.models  # noqa", "each imports only those"),
        ("billing/services.py", "import virtualclusters.models  # noqa", "each imports only"),
        ("virtualclusters/services.py", "import billing.models  # noqa", "each imports only"),
        ("team/audit.py", "import billing.models  # noqa", "each imports only those below"),
        # Any module of the metadata store, one no list names included.
        (
            "metadata_store/mirroring.py",
            "import metadata_store.agent_api.schemas  # noqa",
            "do not know its wire format",
        ),
        (
            "metadata_store/broker_configs.py",
            "from metadata_store.agent_api import views  # noqa",
            "do not know its wire format",
        ),
        ("agents/topics.py", "import schema_registry.services  # noqa", "agents import only core"),
        ("floecli/group_lag.py", "import virtualclusters.models  # noqa", "floe command imports"),
        ("floecli/main.py", "import django  # noqa", "floe command imports only core"),
    ],
)
def test_a_forbidden_import_breaks_the_contracts(tree, module, line, contract):
    _plant(tree, module, line)
    done = _lint_imports(tree)
    assert done.returncode != 0, done.stdout[-2000:]
    broken = done.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, done.stdout[-3000:]
