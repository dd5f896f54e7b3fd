"""Terminal output: the run summary table, evaluator listings, normalized traces, dry-run estimates."""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
from collections.abc import Iterator
from typing import Any

import orjson
import yaml
from rich.console import Console
from rich.table import Table

from assay.evaluators.base import BaseEvaluator
from assay.pipeline.summary import fmt_num

console = Console(highlight=False, soft_wrap=True)
if not console.is_terminal:
    console.width = max(console.width, 150)


def print_summary(summary: dict[str, Any]) -> None:
    c = summary.get("counts", {})
    console.print(
        f"[bold]assay run {summary.get('run_id')}[/bold]  status={summary.get('status')}  "
        f"wall={summary.get('wall_time_s')}s  rate={summary.get('records_per_s')} rec/s"
    )
    console.print(
        f"read {c.get('read', 0):,}  scored {c.get('scored', 0):,}  dead letters {c.get('dead_letters', 0):,}  "
        f"(parse {c.get('parse_errors', 0):,}, normalize {c.get('normalize_errors', 0):,})  "
        f"warnings {c.get('warnings', 0):,}"
    )
    table = Table(show_lines=False)
    keys = summary.get("evaluators", {})
    judged = any(ks.get("input_tokens") or ks.get("judge_calls") for ks in keys.values())
    cols = ["result key", "scored", "errors", "mean", "pass rate", "threshold"]
    for col in [*cols, "tokens", "cost $"] if judged else cols:
        table.add_column(col, justify="left" if col == "result key" else "right", no_wrap=col == "result key")
    for key, ks in keys.items():
        row = [
            key,
            f"{ks['scored']:,}",
            f"{ks['errors']:,}",
            fmt_num(ks.get("mean")),
            fmt_num(ks.get("pass_rate")),
            fmt_num(ks.get("threshold"), 2),
        ]
        if judged:
            tokens = ks.get("input_tokens", 0) + ks.get("output_tokens", 0)
            row += [f"{tokens:,}" if tokens else "-", fmt_num(ks.get("cost_usd"), 4) if ks.get("cost_usd") else "-"]
        table.add_row(*row)
    console.print(table)
    totals = summary.get("totals") or {}
    if totals.get("requests"):
        console.print(
            f"judges: {totals['requests']:,} requests, {totals['rate_limited_429']:,} × 429, "
            f"{totals['retries']:,} retries, {totals['errors']:,} errors, "
            f"{totals['input_tokens'] + totals['output_tokens']:,} tokens, ${totals['cost_usd']:.4f}"
        )
    outputs = summary.get("outputs", {})
    console.print(f"results: {outputs.get('results')}  dead letters: {outputs.get('dead_letter')}")


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
    path: str, *, format: str = "auto", limit: int = 20, read_mode: str = "records"
) -> Iterator[dict[str, Any]]:
    """Each record of a file as assay reads it: position, detected format and canonical trace, or the error."""
    import anyio

    from assay.connectors.file import FileSource
    from assay.stages.normalize import parse_envelope
    from assay.traces.model import Trace
    from assay.traces.normalize import NormalizeOptions

    options = NormalizeOptions(format=format)

    async def collect() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        async with FileSource([path], batch_size=64, read_mode=read_mode) as src:
            async for batch in src.batches():
                for env in batch:
                    t = parse_envelope(env, options)
                    if isinstance(t, Trace):
                        out.append({"position": str(env.position), "format": t.format, "trace": t.to_dict()})
                    else:
                        out.append({"position": str(env.position), "error": t.message, "stage": t.stage})
                    if limit and len(out) >= limit:
                        return out
            for pos, msg in src.read_errors:
                out.append({"position": str(pos), "error": msg, "stage": "read"})
        return out

    yield from anyio.run(collect)


def print_normalized(item: dict[str, Any]) -> None:
    if "error" in item:
        console.print(f"[red]{item['position']}[/red]  cannot normalize ({item['stage']}): {item['error']}")
        return
    t = item["trace"]
    console.print(f"[bold]{item['position']}[/bold]  format={item['format']}  id={t.get('id')}")
    for i, m in enumerate(t["messages"]):
        content = m.get("content")
        text = content if isinstance(content, str) else orjson.dumps(content, default=str).decode()
        text = text.replace("\n", " ")
        if len(text) > 100:
            text = text[:97] + "..."
        line = f"  {i:>3} {m['role']:<9} {text}"
        if m.get("tool_call_id"):
            line += f"  (result of {m['tool_call_id']})"
        console.print(line, markup=False)
        for tc in m.get("tool_calls") or []:
            args = orjson.dumps(tc["args"], default=str).decode()
            flag = f"  ! {tc['args_error']}" if tc.get("args_error") else ""
            console.print(f"        → {tc['name']}({args}){flag}", markup=False)
    if t.get("reference"):
        ref_calls = [tc["name"] for m in t["reference"]["messages"] for tc in (m.get("tool_calls") or [])]
        console.print(f"  reference tool calls: {ref_calls}", markup=False)
    console.print(f"  final output: {str(t.get('final_output'))[:200]!r}", markup=False)


def print_dry_run(report: dict[str, Any]) -> None:
    table = Table(title="dry run: estimated judge usage (nothing was spent)")
    for col in ("evaluator", "judge", "calls", "input tokens", "output tokens", "cost $"):
        table.add_column(col, justify="left" if col in ("evaluator", "judge") else "right")
    for row in report.get("evaluators", []):
        table.add_row(
            row["evaluator"],
            row.get("judge") or "-",
            f"{row['calls']:,}",
            f"{row['input_tokens']:,}",
            f"{row['output_tokens']:,}",
            f"{row['cost_usd']:.4f}",
        )
    console.print(table)
    console.print(
        f"records: {report.get('records', 0):,} (dead letters: {report.get('dead_letters', 0):,})  "
        f"total calls {report.get('calls', 0):,}  estimated cost ${report.get('cost_usd', 0.0):.4f}"
    )
