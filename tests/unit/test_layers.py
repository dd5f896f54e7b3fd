"""The package's layers, kept: no import cycle and no import from a lower layer to a higher one.

An ``ast`` walk of ``assay/`` reads every import, at module level, inside functions and under
``if TYPE_CHECKING:`` alike (a function-level import is still a dependency, only a later one; a
type-only import still ties the modules together for a reader and for mypy). The layers are written
down here and in ``docs/architecture.md`` (a test below keeps the two the same).

Imports that break the rules today are listed, each with where it is, in ``KNOWN_UPWARD`` and
``KNOWN_CYCLES``. These lists may only shrink: a new cycle or a new upward import fails, and so does
an entry that no longer exists (delete it: the list stays exact). ``python tests/unit/test_layers.py``
prints the cycles and upward imports of the tree as it is.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The layers, top first; each imports only from the layers below it (and from its own layer, cycles
#: aside). A module belongs to the layer of its longest listed prefix; ``assay`` alone is the
#: package's own ``__init__`` (the library's face).
LAYERS: list[tuple[str, list[str]]] = [
    (
        "entry points and views",
        [
            "assay",
            "assay.cli",
            "assay.push_command",
            "assay.backfill_command",
            "assay.integrations",
            "assay.testing",
            "assay.report",
            "assay.compat",
            "assay.observability",
            "assay.preflight",
        ],
    ),
    ("the engine", ["assay.pipeline"]),
    ("stages", ["assay.stages"]),
    ("what is computed and who is called", ["assay.evaluators", "assay.registry", "assay.judges", "assay.push"]),
    ("sources and sinks", ["assay.connectors"]),
    (
        "traces, statistics, run-file models",
        [
            "assay.traces",
            "assay.stats",
            "assay.config",
            "assay.connector_table",
            "assay.potato_config",
            "assay.sampling",
        ],
    ),
    (
        "the data that flows, one exception root, small helpers",
        [
            "assay.records",
            "assay.exceptions",
            "assay.events",
            "assay.resources",
            "assay.loading",
            "assay.processes",
            "assay.paths",
            "assay.urls",
        ],
    ),
]

#: Imports from a lower layer to a higher one as they are today: (importer, imported) -> where and
#: why. May only shrink (see the module docstring).
KNOWN_UPWARD: dict[tuple[str, str], str] = {
    # the run file is checked whole when it is loaded: a judge's endpoint config (its provider,
    # keys, limits) is validated by the judges' own model, so a wrong judge is exit 2 before
    # anything runs (function level: judges/config.py is pydantic and the provider table only)
    ("assay.config", "assay.judges.config"): "config.py, RunConfig._judges_known (function level)",
}

#: Import cycles as they are today, one entry per strongly connected set of modules -> the imports
#: that close it. May only shrink (see the module docstring).
KNOWN_CYCLES: dict[frozenset[str], str] = {}


@dataclass(frozen=True)
class Import:
    line: int
    kind: str  # "module" | "function" | "TYPE_CHECKING"


def _modules(package_dir: Path) -> dict[str, tuple[Path, bool]]:
    """Every module under ``package_dir``: dotted name -> (file, is a package ``__init__``)."""
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        out[".".join(parts)] = (path, is_package)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement of a module with where it sits (module level, in a function, or under
    ``if TYPE_CHECKING:``; the innermost reason wins)."""
    found: list[tuple[ast.Import | ast.ImportFrom, str]] = []

    def visit(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append((child, kind))
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, "function")
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), "TYPE_CHECKING")
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), kind)
            else:
                visit(child, kind)

    visit(tree, "module")
    return found


def import_graph(package_dir: Path) -> dict[tuple[str, str], list[Import]]:
    """(importer, imported) -> the imports: each import names the most specific module it reaches
    (``from a.b import c`` is ``a.b.c`` when that is a module, else ``a.b``); the parent packages it
    also runs are not counted (a package's ``__init__`` importing its own modules is no cycle)."""
    modules = _modules(package_dir)
    root = package_dir.name
    edges: dict[tuple[str, str], list[Import]] = defaultdict(list)

    def nearest(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        for node, kind in _imports(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join([*base, node.module] if node.module else base)
                else:
                    source = node.module or ""
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    targets.append(full if full in modules else source)
            for target in targets:
                if target != root and not target.startswith(root + "."):
                    continue
                reached = nearest(target)
                if reached is not None and reached != name:
                    entry = Import(node.lineno, kind)
                    if entry not in edges[(name, reached)]:
                        edges[(name, reached)].append(entry)
    return dict(edges)


def cycles(edges: dict[tuple[str, str], list[Import]]) -> list[frozenset[str]]:
    """The strongly connected sets of more than one module (Tarjan, iteratively)."""
    graph: dict[str, list[str]] = defaultdict(list)
    for a, b in sorted(edges):
        graph[a].append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            successors = graph[node]
            if i < len(successors):
                work.append((node, i + 1))
                nxt = successors[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                members = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.add(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.append(frozenset(members))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def layer_of(module: str, layers: list[tuple[str, list[str]]] = LAYERS) -> int | None:
    """The layer's height (0: the bottom); None for a module no layer lists."""
    best: tuple[int, int] | None = None  # (prefix length, height)
    for position, (_, prefixes) in enumerate(layers):
        height = len(layers) - 1 - position
        for prefix in prefixes:
            root_only = "." not in prefix  # the package's own __init__, not everything under it
            matches = module == prefix or (not root_only and module.startswith(prefix + "."))
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), height)
    return None if best is None else best[1]


def upward(
    edges: dict[tuple[str, str], list[Import]], layers: list[tuple[str, list[str]]] = LAYERS
) -> dict[tuple[str, str], list[Import]]:
    out = {}
    for (a, b), imports in edges.items():
        low, high = layer_of(a, layers), layer_of(b, layers)
        if low is not None and high is not None and low < high:
            out[(a, b)] = imports
    return out


def _where(module: str, imports: list[Import]) -> str:
    path = module.replace(".", "/")
    path = f"{path}/__init__.py" if (ROOT / path).is_dir() else f"{path}.py"
    return ", ".join(f"{path}:{i.line} ({i.kind})" for i in sorted(imports, key=lambda i: i.line))


def _describe_cycle(members: frozenset[str], edges: dict[tuple[str, str], list[Import]]) -> str:
    inside = sorted((a, b) for a, b in edges if a in members and b in members)
    return "\n".join(f"    {a} -> {b}: {_where(a, edges[(a, b)])}" for a, b in inside)


# --- the walker itself, on a package written for the purpose ---------------------------------------


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_the_walk_sees_function_level_and_type_checking_imports(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.low import base\n",
            "pkg/low/__init__.py": "",
            "pkg/low/base.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high import view\n",
            "pkg/high/__init__.py": "",
            "pkg/high/view.py": "def show():\n    from ..low import base\n    return base\n",
            "pkg/high/other.py": "import pkg.high.view\nfrom pkg.low.base import thing\n",
        },
    )
    edges = import_graph(package)
    assert edges[("pkg.low.base", "pkg.high.view")] == [Import(3, "TYPE_CHECKING")]
    assert edges[("pkg.high.view", "pkg.low.base")] == [Import(2, "function")]
    assert edges[("pkg.high.other", "pkg.low.base")] == [Import(2, "module")]
    assert ("pkg.high.other", "pkg.high.view") in edges
    assert cycles(edges) == [frozenset({"pkg.low.base", "pkg.high.view"})]
    layers = [("high", ["pkg", "pkg.high"]), ("low", ["pkg.low"])]
    assert set(upward(edges, layers)) == {("pkg.low.base", "pkg.high.view")}
    # a package's __init__ importing its own modules is no cycle, and is not an upward import
    assert layer_of("pkg", layers) == 1 and layer_of("pkg.low", layers) == 0


# --- the tree -----------------------------------------------------------------------------------


def test_every_module_has_a_layer() -> None:
    missing = [m for m in _modules(ROOT / "assay") if layer_of(m) is None]
    assert not missing, f"place these modules in a layer (LAYERS here and docs/architecture.md): {missing}"


def test_no_new_import_cycle_and_the_known_ones_are_exact() -> None:
    edges = import_graph(ROOT / "assay")
    found = cycles(edges)
    new = [c for c in found if c not in KNOWN_CYCLES]
    gone = [c for c in KNOWN_CYCLES if c not in found]
    report = []
    for c in new:
        report.append(f"NEW import cycle ({len(c)} modules), break it:\n{_describe_cycle(c, edges)}")
    for c in gone:
        report.append(f"KNOWN_CYCLES lists a cycle that no longer exists, delete it: {sorted(c)}")
    assert not report, "\n".join(report)


def test_no_new_upward_import_and_the_known_ones_are_exact() -> None:
    edges = import_graph(ROOT / "assay")
    found = upward(edges)
    new = sorted(set(found) - set(KNOWN_UPWARD))
    gone = sorted(set(KNOWN_UPWARD) - set(found))
    report = [f"NEW import from a lower layer up: {a} -> {b} at {_where(a, found[(a, b)])}" for a, b in new]
    report += [f"KNOWN_UPWARD lists an import that no longer exists, delete it: {a} -> {b}" for a, b in gone]
    assert not report, "\n".join(report)


def layers_text(layers: list[tuple[str, list[str]]] = LAYERS) -> str:
    """The layers as ``docs/architecture.md`` shows them (one line each, top first)."""
    return "\n".join(f"{' · '.join(prefixes)}  —  {title}" for title, prefixes in layers)


def test_the_docs_show_the_same_layers() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert layers_text() in doc, "docs/architecture.md's layer block differs from LAYERS:\n" + layers_text()


if __name__ == "__main__":  # print the tree's cycles and upward imports as they are
    graph = import_graph(ROOT / "assay")
    found_cycles = cycles(graph)
    print(f"{len(found_cycles)} import cycles")
    for members in found_cycles:
        print(f"  {len(members)} modules: {sorted(members)}\n{_describe_cycle(members, graph)}")
    up = upward(graph)
    print(f"{len(up)} imports from a lower layer up ({sum(len(v) for v in up.values())} statements)")
    for (a, b), imports in sorted(up.items()):
        print(f"  {a} -> {b}: {_where(a, imports)}")
    sys.exit(0)
