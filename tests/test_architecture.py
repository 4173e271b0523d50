"""The house rules of docs/design/ARCHITECTURE.md, checked on the source (no import of ldpkit).

* No import circle anywhere in ``src/ldpkit`` (the import graph's strongly connected
  components of more than one module: 0), counting the imports inside functions too, so a
  lazy import cannot hide a circle. ARCHITECTURE.md ("Import circles") records the circles
  there were and the moves that opened them.
* The result types (``Distribution``, ``FrequencyEstimate``) import no mechanism.
* No import circle among the collector's modules (``ldpkit.service``), counting the imports
  inside functions too, and no module of it imports its own package (``from . import x``):
  parts are passed in, never imported back up.
* No import runs up a floor: the table "Floors" of ARCHITECTURE.md puts every top-level
  module and package on a floor; a module imports its own package or lower floors only
  (lazy imports too), ``UPWARD`` names the one exception.
* Every module of every package (``MAPPED``, which must list them all, the top level
  included) is named in ARCHITECTURE.md's module map.
* No module of ``ldpkit.service`` is longer than ``MAX_SERVICE_LINES``, and no class of it
  longer than ``MAX_SERVICE_CLASS_LINES``.
* No comment or docstring in ``src/`` or ``clients/js/src`` names a tracker issue or a work
  branch; nor does any in the Python files of ``tests/``, ``benchmarks/``, ``studies/`` and
  ``examples/`` (which also hold the generators of docs/results' pages).
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
ARCHITECTURE = ROOT / "docs" / "design" / "ARCHITECTURE.md"
#: Packages whose every module the document's map must name ("" is ldpkit's top level).
MAPPED = (
    "",
    "datasets",
    "discovery",
    "experiments",
    "frequency",
    "longitudinal",
    "multidim",
    "numeric",
    "reproduce",
    "service",
    "sets",
    "stream",
)
MAX_SERVICE_LINES = 600
MAX_SERVICE_CLASS_LINES = 400


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / "ldpkit").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The ldpkit modules ``name`` imports, anywhere in the file (lazy imports too)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found.add(full if full in MODULES else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in MODULES and m != name}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


SERVICE = {m: p for m, p in MODULES.items() if m.startswith("ldpkit.service.")}


def test_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_src():
    graph = {m: _imports(m, p) for m, p in MODULES.items()}
    assert _circles(graph) == []


def test_result_types_import_no_mechanism():
    """The result types (``Distribution``, ``FrequencyEstimate``) depend on no mechanism."""
    mechanisms = ("ldpkit.numeric.", "ldpkit.frequency.", "ldpkit.consistency")
    allowed = {"ldpkit.numeric._intervals"}  # variance algebra with no mechanism import
    for name in ("ldpkit.numeric.distribution", "ldpkit.estimate"):
        reached = _imports(name, MODULES[name])
        assert {m for m in reached if m.startswith(mechanisms)} - allowed == set(), name


def test_no_import_circle_in_the_collector():
    graph = {m: _imports(m, p) & set(SERVICE) for m, p in SERVICE.items()}
    assert _circles(graph) == []


def test_collector_modules_never_import_their_package():
    back = {m: sorted(_imports(m, p) & {"ldpkit.service"}) for m, p in SERVICE.items()}
    assert {m: b for m, b in back.items() if b} == {}


def _package(module: str) -> str:
    """The package a module is mapped under: "" for ldpkit's top level."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or MODULES[module].name == "__init__.py" else ""


def test_mapped_covers_every_package():
    assert set(MAPPED) == {_package(m) for m in MODULES if m != "ldpkit"}


@pytest.mark.parametrize("package", MAPPED)
def test_architecture_map_names_every_module(package):
    text = ARCHITECTURE.read_text()
    modules = [m for m in MODULES if m != "ldpkit" and _package(m) == package]
    assert modules
    missing = [m for m in modules if MODULES[m].name not in text]
    assert missing == []


#: Imports that run up a floor by design, with the reason.
UPWARD = {("ldpkit.service.app", "ldpkit"): "reads ldpkit.__version__ for /v1/health"}


def _unit(module: str) -> str:
    """The unit of the floors table a module belongs to: its top-level module or package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "ldpkit"


def _floors() -> dict[str, int]:
    """The floors table of ARCHITECTURE.md: unit -> floor."""
    text = ARCHITECTURE.read_text()
    section = text.split("## Floors", 1)[1].split("\n## ", 1)[0]
    floors = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].isdigit():
            for unit in cells[1].split(","):
                floors[unit.strip().split()[0].strip("`")] = int(cells[0])
    return floors


def test_floors_table_places_every_unit_once():
    floors = _floors()
    units = {_unit(m) for m in MODULES}
    assert units - set(floors) == set(), "add these to the Floors table of ARCHITECTURE.md"
    assert set(floors) - units == set(), "the Floors table names units that do not exist"


def test_no_import_runs_up_a_floor():
    floors = _floors()
    up = []
    for name, path in MODULES.items():
        for target in sorted(_imports(name, path)):
            a, b = _unit(name), _unit(target)
            if a != b and floors[b] >= floors[a] and (name, target) not in UPWARD:
                up.append(f"{name} (floor {floors[a]}) -> {target} (floor {floors[b]})")
    assert up == []
    for name, target in UPWARD:  # a stale exception fails: remove it
        assert target in _imports(name, MODULES[name])


def test_floor_check_sees_a_lazy_import_up(tmp_path):
    lazy = tmp_path / "_base.py"
    lazy.write_text("def estimate():\n    from ..consistency import METHODS\n    return METHODS\n")
    assert "ldpkit.consistency" in _imports("ldpkit.frequency._base", lazy)


def test_collector_modules_stay_small():
    sizes = {m: len(p.read_text().splitlines()) for m, p in SERVICE.items()}
    over = {m: n for m, n in sizes.items() if n > MAX_SERVICE_LINES}
    assert over == {}


def test_collector_classes_stay_small():
    """No class of ``ldpkit.service`` spans more than ``MAX_SERVICE_CLASS_LINES`` lines."""
    over = {}
    for m, p in SERVICE.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno
                if lines > MAX_SERVICE_CLASS_LINES:
                    over[f"{m}.{node.name}"] = lines
    assert over == {}


# A comment that points at a tracker issue ("issue 27", possibly wrapped over two lines) or
# at a work branch ("i28-docstyle", "w2-...") means nothing to a reader of the repository.
_TRACKER_REFERENCE = re.compile(r"\b[Ii]ssues?(?:\s|#|//)*\d|(?<![\w-])(?:i\d\d|w\d+)-[a-z]")


def test_no_comment_refers_to_an_issue_or_a_work_branch():
    clients = ROOT / "clients" / "js" / "src"
    paths = [*sorted((SRC / "ldpkit").rglob("*.py")), *sorted((SRC / "ldpkit").rglob("*.js"))]
    paths += sorted(clients.rglob("*.js"))
    found = [
        f"{p.relative_to(ROOT)}: {m.group(0)!r}"
        for p in paths
        for m in _TRACKER_REFERENCE.finditer(p.read_text(encoding="utf-8"))
    ]
    assert found == []


#: Where else the rule holds: the Python files beside the package.
_BESIDE_SRC = ("tests", "benchmarks", "studies", "examples")
#: Matches that are no reference, per file: a figure's name ("wav25-w1-vs-j.png", W1 against J)
#: and, in this file, the examples in the comment above ``_TRACKER_REFERENCE`` and this list.
_NOT_A_REFERENCE = {
    "tests/test_architecture.py": {"issue 2", "i28-d", "w1-v"},
    "tests/reproduce/test_wav25.py": {"w1-v"},
}


def test_no_comment_beside_src_refers_to_an_issue_or_a_work_branch():
    """The same rule over tests, benchmarks, studies and examples, but the listed matches."""
    paths = [p for d in _BESIDE_SRC for p in sorted((ROOT / d).rglob("*.py"))]
    assert len(paths) > 100  # the directories are where this test expects them
    found = []
    unused = {(name, text) for name, texts in _NOT_A_REFERENCE.items() for text in texts}
    for p in paths:
        name = p.relative_to(ROOT).as_posix()
        for m in _TRACKER_REFERENCE.finditer(p.read_text(encoding="utf-8")):
            if m.group(0) in _NOT_A_REFERENCE.get(name, ()):
                unused.discard((name, m.group(0)))
            else:
                found.append(f"{name}: {m.group(0)!r}")
    assert found == []
    assert unused == set()  # an exception whose text is gone is dropped from the list


def test_no_doc_cites_a_tracker_issue():
    """README, docs/ and the JS client's README say what was done, not which issue asked."""
    tracker = re.compile(r"\b[Ii]ssues?(?:\s|#|//)*\d")
    paths = [ROOT / "README.md", ROOT / "clients" / "js" / "README.md"]
    paths += sorted((ROOT / "docs").rglob("*.md"))
    assert len(paths) > 20  # docs/ is where this test expects it
    found = [
        f"{p.relative_to(ROOT).as_posix()}: {m.group(0)!r}"
        for p in paths
        for m in tracker.finditer(p.read_text(encoding="utf-8"))
    ]
    assert found == []
