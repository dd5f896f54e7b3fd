"""Synthetic results locations for the report tests: rows, dead letters, a summary, a source file.

Deterministic: row ``i`` of run ``salt`` depends only on both. About 8 % of the ``correctness``
verdicts depend on the salt, so two runs with different salts differ in a known set of traces.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import agent_messages

KEYS = ("correctness", "tool_call_accuracy", "trajectory_strict_match")
THRESHOLD = 0.5


def _unit(*parts: object) -> float:
    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def source_record(i: int) -> dict[str, Any]:
    """The source record of trace ``i`` (a small OpenAI-style agent run)."""
    return {
        "id": f"t{i:05d}",
        "inputs": f"question {i}",
        "messages": agent_messages(
            ("search", {"q": i}), ("fetch", {"url": f"https://example.com/{i}"}), final=f"answer {i}"
        ),
        "reference_outputs": f"answer {i}",
    }


def write_source(path: Path, n: int) -> Path:
    """``n`` source records, one per line (line ``i + 1`` holds trace ``i``)."""
    with open(path, "wb") as f:
        for i in range(n):
            f.write(orjson.dumps(source_record(i)) + b"\n")
    return path


def judge_verdict(i: int, salt: str) -> float:
    """The ``correctness`` score of trace ``i`` in run ``salt``."""
    if _unit("flip", i) < 0.08:
        return 1.0 if _unit("judge", i, salt) < 0.5 else 0.0
    return 1.0 if _unit("judge", i) < 0.6 else 0.0


def make_row(i: int, *, salt: str = "a", source: str | None = None, run_id: str = "run") -> dict[str, Any]:
    """One result row like the sink writes."""
    results: dict[str, Any] = {}
    if _unit("err", i) < 0.01:
        results["correctness"] = {
            "key": "correctness",
            "score": None,
            "value": None,
            "comment": None,
            "metadata": {},
            "error": "judge 'standin': HTTP 500: upstream",
        }
    else:
        score = judge_verdict(i, salt)
        results["correctness"] = {
            "key": "correctness",
            "score": score,
            "value": score == 1.0,
            "comment": f"{'right' if score else 'wrong'} answer for question {i} <script>alert(1)</script>",
            "metadata": {"usage": {"input_tokens": 500, "output_tokens": 20, "cost_usd": 0.00054, "calls": 1}},
            "error": None,
        }
    matched = int(_unit("tca", i) * 5) % 5
    results["tool_call_accuracy"] = {
        "key": "tool_call_accuracy",
        "score": matched / 4 if matched < 5 else 1.0,
        "value": f"{min(matched, 4)}/4",
        "comment": f"reproduced {matched} of 4",
        "metadata": {"matched": matched},
        "error": None,
    }
    strict = 1.0 if _unit("strict", i) < 0.4 else 0.0
    results["trajectory_strict_match"] = {
        "key": "trajectory_strict_match",
        "score": strict,
        "value": bool(strict),
        "comment": "strict match " + ("pass" if strict else "fail"),
        "metadata": {},
        "error": None,
    }
    row: dict[str, Any] = {
        "trace_id": f"t{i:05d}",
        "run_id": run_id,
        "results": results,
        "position": {"file": source or "gone.jsonl", "line": i + 1},
    }
    if i % 97 == 0:
        row["warnings"] = [f"agent message 0 tool call 'x': tool arguments are JSON but not an object (str) {i}"]
    return row


def dead_letters(n: int) -> Iterator[dict[str, Any]]:
    """``n`` dead-letter records of three reasons."""
    kinds = [("parse", "JSONDecodeError"), ("normalize", "NormalizationError"), ("normalize", "NormalizationError")]
    for j in range(n):
        stage, error_type = kinds[j % 3]
        yield {
            "raw": "{broken" if stage == "parse" else '{"id": 1}',
            "file": "corpus.jsonl",
            "line": 10 + j,
            "stage": stage,
            "error_type": error_type,
            "error": f"corpus.jsonl:{10 + j}: {error_type}",
            "severity": "error",
        }


def summarize(rows: list[dict[str, Any]], dead: int, *, started_at: str, status: str = "ok") -> dict[str, Any]:
    """A ``_SUMMARY.json`` as the engine writes it, computed the plain way."""
    evaluators: dict[str, Any] = {}
    for key in KEYS:
        results = [r["results"][key] for r in rows if key in r["results"]]
        scores = [r["score"] for r in results if r["error"] is None and r["score"] is not None]
        passed = sum(s >= THRESHOLD for s in scores)
        evaluators[key] = {
            "count": len(results),
            "scored": len(scores),
            "errors": sum(r["error"] is not None for r in results),
            "unscored": 0,
            "mean": round(sum(scores) / len(scores), 6) if scores else None,
            "pass_rate": round(passed / len(scores), 6) if scores else None,
            "threshold": THRESHOLD,
            "sum": float(sum(scores)),
            "passed": passed,
        }
    calls = sum(1 for r in rows if r["results"]["correctness"]["error"] is None)
    judge = {
        "provider": "openai",
        "model": "judge-1",
        "calls": calls,
        "requests": calls + 40,
        "ok": calls,
        "errors": len(rows) - calls,
        "http_429": 25,
        "http_5xx": 15,
        "http_4xx": 0,
        "timeouts": 0,
        "connection_errors": 0,
        "retries": 40,
        "cached": 0,
        "input_tokens": 500 * calls,
        "output_tokens": 20 * calls,
        "cost_usd": round(0.00054 * calls, 8),
        "latency_p50_s": 0.8,
        "latency_p99_s": 3.1,
    }
    return {
        "run_id": f"run-{started_at[:10]}",
        "status": status,
        "started_at": started_at,
        "finished_at": started_at,
        "wall_time_s": 12.5,
        "records_per_s": 1600.0,
        "counts": {
            "read": len(rows) + dead,
            "scored": len(rows),
            "dead_letters": dead,
            "parse_errors": 0,
            "normalize_errors": 0,
            "warnings": 0,
            "skipped": 0,
            "abandoned": 0,
        },
        "evaluators": evaluators,
        "judges": {"standin": judge},
        "totals": {
            "requests": judge["requests"],
            "rate_limited_429": 25,
            "server_errors_5xx": 15,
            "timeouts": 0,
            "cached": 0,
            "retries": 40,
            "errors": judge["errors"],
            "input_tokens": judge["input_tokens"],
            "output_tokens": judge["output_tokens"],
            "cost_usd": judge["cost_usd"],
        },
        "exit_code": 0 if status == "ok" else 3,
        "messages": [],
    }


def write_run(
    out: Path,
    n: int,
    *,
    salt: str = "a",
    source: Path | None = None,
    dead: int = 9,
    started_at: str = "2026-11-21T02:00:00+00:00",
    parts: int = 2,
    summary: bool = True,
    skip: set[int] | frozenset[int] = frozenset(),
) -> dict[str, Any]:
    """A results location of ``n`` traces (minus ``skip``) in ``parts`` parts (the last gzip'd);
    returns the summary written (or that would have been)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "_dead_letter").mkdir(exist_ok=True)
    rows = [make_row(i, salt=salt, source=str(source) if source else None) for i in range(n) if i not in skip]
    per = -(-len(rows) // parts)
    for p in range(parts):
        chunk = b"".join(orjson.dumps(r) + b"\n" for r in rows[p * per : (p + 1) * per])
        if p == parts - 1 and parts > 1:
            (out / f"part-{p:05d}-00000.jsonl.gz").write_bytes(gzip.compress(chunk))
        else:
            (out / f"part-{p:05d}-00000.jsonl").write_bytes(chunk)
    (out / "_dead_letter" / "dead-00000-00000.jsonl").write_bytes(
        b"".join(orjson.dumps(d) + b"\n" for d in dead_letters(dead))
    )
    data = summarize(rows, dead, started_at=started_at)
    if summary:
        (out / "_SUMMARY.json").write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
        (out / "_SUCCESS").write_bytes(b"")
    return data
