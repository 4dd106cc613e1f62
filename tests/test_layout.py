"""The rules of the layout (docs/ARCHITECTURE.md, "The rooms"), read from the code itself:
dependencies run one way, the core package knows no Django, asyncio or other room (its
storage does blocking I/O: docs/ARCHITECTURE.md says so), nothing outside the agent
process imports it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIRST_PARTY = (
    "core",
    "agents",
    "metadata_store",
    "virtualclusters",
    "controlplane",
    "tenancy",
    "team",
    "billing",
    "jobs",
    "schema_registry",
)


def _modules() -> dict[str, Path]:
    found = {}
    for package in FIRST_PARTY:
        for path in (REPO / package).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if "migrations" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(module: str, path: Path) -> set[str]:
    """Every first-party module `module` imports, at any depth of its code (module level,
    inside functions, under TYPE_CHECKING): a circle is a circle wherever it hides."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from package import module` imports the module; any other name is the
            # package's (or module's) own.
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def _cycle() -> list[str] | None:
    """One import circle among first-party modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for target in sorted(GRAPH[module]):
            if state.get(target) == 1:
                return stack[stack.index(target) :] + [target]
            if target not in state and (found := visit(target)):
                return found
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(GRAPH):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_there_is_no_import_circle():
    assert _cycle() is None, " -> ".join(_cycle() or [])


def test_the_layout_checks_can_see_a_circle(monkeypatch):
    """The circle finder is not vacuous: two modules importing each other are found."""
    monkeypatch.setitem(GRAPH, "agents.server", GRAPH["agents.server"] | {"agents.dispatch"})
    monkeypatch.setitem(GRAPH, "agents.dispatch", GRAPH["agents.dispatch"] | {"agents.server"})
    assert _cycle() is not None


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith("agents")))
def test_nothing_outside_the_agent_imports_it(module):
    assert not {m for m in GRAPH[module] if m == "agents" or m.startswith("agents.")}


def _third_party(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.split(".")[0] == "core"))
def test_the_core_package_knows_no_django_no_asyncio_and_no_other_room(module):
    imported = _third_party(MODULES[module])
    assert not imported & {"django", "rest_framework", "asyncio", "aiohttp", "celery"}
    assert not {m for m in GRAPH[module] if m.split(".")[0] != "core"}, "core imports only core"


def test_tests_outside_tests_agents_and_benchmarks_do_not_import_the_agent():
    """Benchmarks start agents as processes; what they share with the agent is in core."""
    offenders = []
    for path in [*(REPO / "tests").rglob("*.py"), *(REPO / "bench").rglob("*.py")]:
        if "node_modules" in path.parts or path.is_relative_to(REPO / "tests" / "agents"):
            continue
        if path == Path(__file__):
            continue
        if {"agents"} & _third_party(path):
            offenders.append(str(path.relative_to(REPO)))
    assert not offenders


# --- SQL over the metadata store's tables lives in metadata_store/ ---------------------

METADATA_TABLES = set(
    re.findall(r'db_table = "(floe_\w+)"', (REPO / "metadata_store/models.py").read_text())
)


def _sql_over(path: Path, tables: set[str]) -> set[str]:
    """The metadata-store tables the string constants of `path` name in SQL."""
    pattern = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|USING|TABLE)\s+(floe_\w+)", re.I)
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found |= {t for t in pattern.findall(node.value) if t in tables}
    # Statements built from pieces ("..." " FROM floe_x" "..."): Python joins adjacent
    # literals, so each piece is one constant above; a table name split across pieces
    # would hide, none is.
    return found


def _files_with_sql_outside() -> dict[str, set[str]]:
    offenders = {}
    for package in FIRST_PARTY:
        if package == "metadata_store":
            continue
        for path in (REPO / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            tables = _sql_over(path, METADATA_TABLES)
            if tables:
                offenders[str(path.relative_to(REPO))] = tables
    return offenders


def test_sql_over_the_metadata_stores_tables_lives_in_metadata_store():
    assert {"floe_batch", "floe_file", "floe_partition", "floe_topic"} <= METADATA_TABLES
    offenders = _files_with_sql_outside()
    assert not offenders, offenders


def test_the_sql_check_sees_a_statement(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('SQL = ("SELECT id" " FROM floe_batch b WHERE b.file_id = %s")\n')
    assert _sql_over(planted, METADATA_TABLES) == {"floe_batch"}


# --- type checks: the rooms carry no `# type: ignore` ------------------------------------

TYPED_ROOMS = ("core", "floecli", "agents", "jobs", "tenancy", "metadata_store", "virtualclusters",
               "billing", "schema_registry", "team", "controlplane")  # fmt: skip


def test_no_room_silences_the_type_checker_line_by_line():
    """What mypy cannot check is said once in pyproject.toml (a package without types),
    never with a `# type: ignore` beside a line."""
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for room in TYPED_ROOMS
        for path in (REPO / room).rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "type: ignore" in line
    ]
    assert not found, found
