"""Terminal views of the catalog and of the input: evaluator listings, params, normalized traces."""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
from collections.abc import Iterator
from typing import Any

import orjson
import yaml
from rich.table import Table

from assay.evaluators.base import BaseEvaluator
from assay.report.terminal import console, safe


def print_evaluator_list(items: list[dict[str, str]]) -> None:
    table = Table(show_header=True)
    table.add_column("evaluator")
    table.add_column("description")
    for item in items:
        table.add_row(item["name"], item["description"])
    console.print(table)


def attribute_docs(model: type) -> dict[str, str]:
    """The docstrings written under class attributes (``x: int = 1`` then ``\"\"\"doc\"\"\"``), through
    the class's bases; read from the source only when asked (``assay evaluators show``), so that
    defining the params models costs nothing at start-up."""
    docs: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for stmt, nxt in itertools.pairwise(body):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[stmt.target.id] = inspect.cleandoc(nxt.value.value)
    return docs


def describe_params(cls: type[BaseEvaluator[Any]]) -> list[dict[str, Any]]:
    rows = []
    docs = attribute_docs(cls.Params)
    for name, f in cls.Params.model_fields.items():
        ann = f.annotation
        type_name = getattr(ann, "__name__", None) or str(ann).replace("typing.", "")
        rows.append(
            {
                "name": name,
                "type": type_name,
                "required": f.is_required(),
                "default": None if f.is_required() else f.get_default(call_default_factory=True),
                "description": f.description or docs.get(name, ""),
            }
        )
    return rows


def print_evaluator(name: str, cls: type[BaseEvaluator[Any]]) -> None:
    console.print(f"[bold]{name}[/bold] — ", end="")
    console.print(cls.description, markup=False)
    doc = (cls.__doc__ or "").strip()
    if doc:
        console.print(doc, markup=False)
    module_doc = (__import__(cls.__module__, fromlist=["_"]).__doc__ or "").strip()
    if module_doc and module_doc != doc:
        console.print()
        console.print(module_doc, markup=False)
    table = Table(title="params")
    for col in ("name", "type", "default", "description"):
        table.add_column(col)
    for row in describe_params(cls):
        default = "(required)" if row["required"] else repr(row["default"])
        table.add_row(row["name"], row["type"], default, row["description"])
    console.print(table)
    snippet = yaml.safe_dump({"evaluators": [{"name": name, "params": dict(cls.example)}]}, sort_keys=False)
    console.print("example run-file snippet:")
    console.print(snippet, markup=False)


def iter_normalized(
    path: str, *, format: str = "auto", limit: int = 20, read_mode: str = "records", input_format: str = "auto"
) -> Iterator[dict[str, Any]]:
    """Each record of a file as assay reads it: position, detected format and canonical trace, or the
    error; ``reading`` says how the file was cut into records (JSON lines, an array read as one
    trace, export rows grouped by trace id) when the source reported it."""
    import anyio
    from pydantic import ValidationError

    from assay.connectors.builtin import FILE
    from assay.connectors.path_config import SourceConfig
    from assay.connectors.registry import SourceContext
    from assay.exceptions import ConfigError
    from assay.stages.normalize import parse_envelope
    from assay.traces.model import Trace
    from assay.traces.normalize import NormalizeOptions

    options = NormalizeOptions(format=format)

    async def collect() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        # as a run reads it: Parquet, export rows assembled into traces, sessions
        try:
            config = SourceConfig.model_validate({"path": path, "input_format": input_format, "read_mode": read_mode})
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ConfigError(f"--{'-'.join(map(str, first['loc'])).replace('_', '-')}: {first['msg']}") from None
        src = FILE.build_source(config, SourceContext(batch_size=64))
        readings: list[dict[str, str]] = []  # the wrappers' first (export rows grouped), then the files'
        layer: Any = src
        while layer is not None:
            if isinstance(getattr(layer, "readings", None), dict):
                readings.append(layer.readings)
            layer = getattr(layer, "inner", None)

        def reading(name: str) -> dict[str, str]:
            text = next((r[name] for r in readings if name in r), None)
            return {"reading": text} if text else {}

        async with src:
            async for batch in src.batches():
                for env in batch:
                    t = parse_envelope(env, options)
                    where = {"position": str(env.position), **reading(env.position.source)}
                    if isinstance(t, Trace):
                        out.append({**where, "format": t.format, "trace": t.to_dict()})
                    else:
                        out.append({**where, "error": t.message, "stage": t.stage})
                    if limit and len(out) >= limit:
                        return out
            for pos, msg in src.read_errors:
                out.append({"position": str(pos), "error": msg, "stage": "read"})
        return out

    yield from anyio.run(collect)


def print_normalized(item: dict[str, Any]) -> None:
    """One normalized record as ``assay normalize`` shows it; everything that comes from the file
    is :func:`~assay.report.terminal.safe` (no terminal escape sequence gets through) and never
    read as markup."""
    if "error" in item:
        console.print(f"{item['position']}  cannot normalize ({item['stage']}): {safe(item['error'])}", markup=False)
        return
    t = item["trace"]
    console.print(f"{safe(item['position'])}  format={safe(item['format'])}  id={safe(t.get('id'))}", markup=False)
    for i, m in enumerate(t["messages"]):
        content = m.get("content")
        text = content if isinstance(content, str) else orjson.dumps(content, default=str).decode()
        text = text.replace("\n", " ")
        if len(text) > 100:
            text = text[:97] + "..."
        line = f"  {i:>3} {m['role']:<9} {text}"
        if m.get("tool_call_id"):
            line += f"  (result of {m['tool_call_id']})"
        console.print(safe(line), markup=False)
        for tc in m.get("tool_calls") or []:
            args = orjson.dumps(tc["args"], default=str).decode()
            flag = f"  ! {tc['args_error']}" if tc.get("args_error") else ""
            console.print(safe(f"        → {tc['name']}({args}){flag}"), markup=False)
    if t.get("reference"):
        ref_calls = [tc["name"] for m in t["reference"]["messages"] for tc in (m.get("tool_calls") or [])]
        console.print(f"  reference tool calls: {ref_calls}", markup=False)
    console.print(f"  final output: {str(t.get('final_output'))[:200]!r}", markup=False)
