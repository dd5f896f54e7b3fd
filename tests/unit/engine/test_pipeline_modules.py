"""The engine's modules import each other in one direction: no cycle, none hidden by an import inside
a function, and no private name (``_judge_pool``) used outside its module."""

from __future__ import annotations

import ast
from pathlib import Path

import assay

PACKAGE = Path(assay.__file__).parent


def _imports(path: Path) -> tuple[set[str], list[str], list[str]]:
    """Top-level ``assay.*`` modules imported, deferred ``assay.pipeline`` imports, private names."""
    tree = ast.parse(path.read_text())
    top = {n for n in tree.body if isinstance(n, ast.ImportFrom)}
    modules: set[str] = set()
    deferred: list[str] = []
    private: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("assay."):
            continue
        module = str(node.module)
        private += [f"{module}.{a.name}" for a in node.names if a.name.startswith("_") and a.name != "__version__"]
        if node in top:
            modules.add(module)
        elif module.startswith("assay.pipeline") and not _type_checking_only(tree, node):
            deferred.append(module)
    return modules, deferred, private


def _type_checking_only(tree: ast.Module, node: ast.ImportFrom) -> bool:
    return any(
        isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test) and node in list(ast.walk(n))
        for n in tree.body
    )


def test_no_import_cycle_and_no_deferred_or_private_import_in_the_engine() -> None:
    graph: dict[str, set[str]] = {}
    problems: list[str] = []
    for path in sorted((PACKAGE / "pipeline").glob("*.py")):
        name = f"assay.pipeline.{path.stem}"
        modules, deferred, private = _imports(path)
        graph[name] = {m for m in modules if m.startswith("assay.pipeline.")}
        problems += [f"{name} imports {m} inside a function" for m in deferred]
        problems += [f"{name} imports the private {p}" for p in private]

    def visit(node: str, path: list[str]) -> None:
        for dep in sorted(graph.get(node, ())):
            if dep in path:
                problems.append("cycle: " + " -> ".join([*path[path.index(dep) :], dep]))
            else:
                visit(dep, [*path, dep])

    for name in graph:
        visit(name, [name])
    assert problems == []


def test_the_engine_knows_no_concrete_connector() -> None:
    """Connectors own their names, defaults and resume-state shapes: no ``s3://`` check, no
    connector type and no ledger shape in ``assay/pipeline``."""
    # a ledger shape read or written (the Kafka ``done`` ranges), not any word "done" (the batch
    # status a waiter reads is {"finished", "open", "done"})
    marks = ('"s3://', "'s3://", '== "file"', '== "kafka"', '== "s3"', '["done"]', '.get("done"', "merge_ledger")
    found = [
        f"{path.name}: {mark}"
        for path in sorted((PACKAGE / "pipeline").glob("*.py"))
        for mark in marks
        if mark in path.read_text()
    ]
    assert found == []
