"""Every example of the seed documents, run with only its import line swapped (issue 30's check:
60 examples, 58 runnable without a service).

The openevals / agentevals / agent-evaluation-catalog examples (seeds 002–004) are run by
``tests/integration/judge_evaluators/test_compat_seed_examples.py``; this module runs potato's
(seeds 000 and 001: the programmatic-evaluators page, scraped with and without code fences) with
``from potato.evaluators …`` → ``from assay.compat.potato.evaluators …``, against the stand-in
judge configured the way potato users configure a judge (``ai_support``), and checks the count.

``seed_potato_examples.json`` holds the extracted blocks so the tests run without the seeds; when
the seeds are present (``ASSAY_SEEDS_DIR``, default ``/work/shared/seeds``) a test checks the copy.
Regenerate with ``python tests/integration/compat/test_seed_examples_all.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "seed_potato_examples.json"
OPENEVALS_FIXTURE = HERE.parent / "judge_evaluators" / "seed_examples.json"
SEEDS_DIR = Path(os.environ.get("ASSAY_SEEDS_DIR", "/work/shared/seeds"))

_FENCE = re.compile(r"^(?P<indent>[ \t]*)```python[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
_CODE = re.compile(r"^(\s+\S|#|from |import |if |\)|\]|[A-Za-z_][\w.]*(\[[^\]]*\])?\s*(=|\(|\.|#|$))")
_PROSE = re.compile(r"^[A-Z][a-z]+ [a-z]")
_IMPORT = re.compile(r"^(\s*from\s+)potato(\.evaluators\b)", re.M)

#: Seed examples that are not examples of a library: run nowhere (with the reason).
NOT_EXAMPLES = {("004", 440): "the catalog's own harness: imports its evaluators module"}
#: Examples that need a service: not runnable here.
NEED_A_SERVICE = {
    ("002", 266): "LangSmith's pytest plugin (a LangSmith account)",
    ("002", 314): "LangSmith's Client.evaluate (a LangSmith account)",
}


def _unfenced(text: str) -> list[tuple[int, str]]:
    """Code paragraphs of a page scraped without fences: from a ``from potato.evaluators import``
    line through the code lines after it (blank lines inside included)."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("from potato.evaluators import"):
            i += 1
            continue
        start = j = i
        while j < len(lines):
            if lines[j].strip() == "":
                k = j + 1
                while k < len(lines) and lines[k].strip() == "":
                    k += 1
                if k < len(lines) and _CODE.match(lines[k]) and not _PROSE.match(lines[k]):
                    j = k
                    continue
                break
            if not _CODE.match(lines[j]):
                break
            j += 1
        out.append((start + 1, "\n".join(lines[start:j]) + "\n"))
        i = j
    return out


def extract(seeds_dir: Path = SEEDS_DIR) -> list[dict[str, Any]]:
    """potato's examples: seed 000's fenced blocks and seed 001's unfenced ones."""
    blocks: list[dict[str, Any]] = []
    for path in sorted(seeds_dir.glob("00[01]_*.txt")):
        seed, text = path.name[:3], path.read_text(encoding="utf-8")
        found = [
            (text[: m.start()].count("\n") + 1, textwrap.dedent(m.group("body"))) for m in _FENCE.finditer(text)
        ] or _unfenced(text)
        blocks.extend({"seed": seed, "line": line, "code": code} for line, code in found if "potato" in code)
    return blocks


def rewrite_imports(code: str) -> str:
    return _IMPORT.sub(r"\1assay.compat.potato\2", code)


BLOCKS: list[dict[str, Any]] = json.loads(FIXTURE.read_text(encoding="utf-8")) if FIXTURE.exists() else []

PRELUDE = """
import json as _json
def _call(name, **args):
    return {"type": "function", "function": {"name": name, "arguments": _json.dumps(args)}}
agent_trace = trace = trajectory = [
    {"role": "user", "content": "refund order 7"},
    {"role": "assistant", "content": "", "tool_calls": [_call("search", q="order 7"), _call("submit", id=1)]},
    {"role": "tool", "content": "ok"},
    {"role": "assistant", "content": "Refunded order 7 and emailed the itinerary."},
]
gold_trace = gold = [
    {"role": "assistant", "content": "", "tool_calls": [_call("search", q="x"), _call("submit", id=1)]},
]
task_prompt = task = "Refund order 7"
text, a, b = "an error occurred", "kitten", "sitting"
schema, model_json = {"type": "object", "required": ["a"]}, '{"a": 1}'
q, retrieved_docs, answer = "Capital of France?", "Paris is the capital of France.", "Paris."
"""


@pytest.fixture(scope="module")
def judge_url() -> Iterator[str]:
    from assay.testing.judge_server import JudgeServerThread

    with JudgeServerThread() as server:
        yield server.url


def run_example(block: dict[str, Any], url: str) -> dict[str, Any]:
    config = {
        "ai_support": {
            "enabled": True,
            "endpoint_type": "openai",
            "ai_config": {"model": "gpt-4o-mini", "base_url": url + "/v1", "api_key": "sk-stand-in"},
        }
    }
    namespace: dict[str, Any] = {"__name__": f"seed_{block['seed']}_{block['line']}", "config": config}
    namespace["task_config"] = config
    exec(PRELUDE, namespace)
    code = rewrite_imports(block["code"])
    assert "from potato" not in code
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, f"seed {block['seed']}:{block['line']}", "exec"), namespace)
    return namespace


def _ids(block: dict[str, Any]) -> str:
    return f"{block['seed']}:{block['line']}"


def _marks(block: dict[str, Any]) -> Any:
    heavy = "EmbeddingDistance()" in block["code"]  # loads the sentence-transformers model (torch)
    return pytest.param(block, id=_ids(block), marks=[pytest.mark.slow] if heavy else [])


@pytest.mark.parametrize("block", [_marks(b) for b in BLOCKS])
def test_potato_example_runs_with_only_its_import_changed(block: dict[str, Any], judge_url: str) -> None:
    from assay.records import Result

    namespace = run_example(block, judge_url)
    results = [v for v in namespace.values() if isinstance(v, Result)]
    for value in namespace.values():
        if isinstance(value, dict) and all(isinstance(v, Result) for v in value.values()) and value:
            results.extend(value.values())  # rag_triad's evaluators give Results through .evaluate
    if "evaluate(" in block["code"] and re.search(r"^(result|r|g) = ", block["code"], re.M):
        assert results, "the example produced no result"
        assert all(r.error is None and r.score is not None for r in results), results


def test_the_copy_matches_the_seeds() -> None:
    if not SEEDS_DIR.is_dir():
        pytest.skip(f"seeds not present at {SEEDS_DIR}")
    assert extract() == BLOCKS


def test_sixty_examples_fifty_eight_runnable() -> None:
    """The seeds' examples: openevals / agentevals / catalog blocks (less the catalog's own
    harness) and potato's; all but the two needing LangSmith run (the agentevals page's shared
    setup, 002:49, runs as the prelude of the examples after it)."""
    other = json.loads(OPENEVALS_FIXTURE.read_text(encoding="utf-8"))
    keys = [(b["seed"], b["line"]) for b in other]
    assert set(NOT_EXAMPLES) | set(NEED_A_SERVICE) <= set(keys)
    examples = [k for k in keys if k not in NOT_EXAMPLES] + [(b["seed"], b["line"]) for b in BLOCKS]
    runnable = [k for k in examples if k not in NEED_A_SERVICE]
    assert (len(examples), len(runnable)) == (60, 58)
    assert len(BLOCKS) == 13 and {b["seed"] for b in BLOCKS} == {"000", "001"}


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(extract(), indent=1) + "\n", encoding="utf-8")
