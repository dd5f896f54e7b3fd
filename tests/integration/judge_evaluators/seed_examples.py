"""The Python examples of the seed documents (openevals' README, the LangChain agentevals page,
the agent-evaluation catalog), extracted verbatim, with their import lines rewritten to
``assay.compat``.

``seed_examples.json`` holds the extracted blocks so the tests run without the seeds; when the
seeds are present (``ASSAY_SEEDS_DIR``, default ``/work/shared/seeds``) a test checks the copy is
still what the seeds say. Regenerate with ``python tests/integration/judge_evaluators/seed_examples.py``.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "seed_examples.json"
SEEDS_DIR = Path(os.environ.get("ASSAY_SEEDS_DIR", "/work/shared/seeds"))
SEED_PREFIXES = ("002", "003", "004")  # agentevals page, openevals README, agent-evaluation catalog

_FENCE = re.compile(r"^(?P<indent>[ \t]*)```python[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
_OUTPUT = re.compile(r"\s*```[ \t]*\n(?P<body>.*?)^```", re.M | re.S)
_KEY = re.compile(r"""['"]?key['"]?\s*:\s*['"](\w+)['"]""")
_SCORE = re.compile(r"""['"]?score['"]?\s*:\s*(True|False|true|false|-?[0-9.]+)""")
_USES = re.compile(r"\b(openevals|agentevals)\b|\bcreate_\w*(evaluator|llm_as_judge)\(|check_trajectory\(")
_IMPORT = re.compile(r"^(\s*from\s+)(openevals|agentevals)(\.[\w.]+)?(\s+import\b)", re.M)


def extract(seeds_dir: Path = SEEDS_DIR) -> list[dict[str, Any]]:
    """Every Python block of the seeds that uses openevals/agentevals (or, in the agentevals page,
    the shared setup's evaluator), with the evaluator key and score the document prints after it."""
    blocks: list[dict[str, Any]] = []
    for path in sorted(seeds_dir.glob("*.txt")):
        seed = path.name[:3]
        if seed not in SEED_PREFIXES:
            continue
        text = path.read_text(encoding="utf-8")
        for m in _FENCE.finditer(text):
            code = textwrap.dedent(m.group("body"))
            if not re.search(
                r"\b(openevals|agentevals)\b|\bcreate_\w*(evaluator|llm_as_judge)\(|check_trajectory\(", code
            ):
                continue
            out = _OUTPUT.match(text, m.end() + 1)
            key = _KEY.search(out.group("body")) if out else None
            score = _SCORE.search(out.group("body")) if out else None
            blocks.append(
                {
                    "seed": seed,
                    "line": text[: m.start()].count("\n") + 1,
                    "code": code,
                    "expected_key": key.group(1) if key else None,
                    "expected_score": json.loads(score.group(1).lower()) if score else None,
                }
            )
    return blocks


def load() -> list[dict[str, Any]]:
    return list(json.loads(FIXTURE.read_text(encoding="utf-8")))


def rewrite_imports(code: str) -> str:
    """``from openevals.X import`` → ``from assay.compat.openevals.X import`` (and agentevals)."""
    return _IMPORT.sub(lambda m: f"{m.group(1)}assay.compat.{m.group(2)}{m.group(3) or ''}{m.group(4)}", code)


def restore_indentation(code: str) -> str:
    """Undo the scrape: it escaped backticks (``\\```` → ````` ``) and lost the indentation of
    ``class``/``with`` bodies (indent the lines after a block opener up to the next blank line,
    until the code compiles)."""
    code = code.replace("\\`", "`")
    for _ in range(10):
        try:
            compile(code, "<seed>", "exec")
            return code
        except IndentationError as exc:
            lines = code.splitlines()
            i = (exc.lineno or 1) - 1
            while i < len(lines) and lines[i].strip():
                lines[i] = "    " + lines[i]
                i += 1
            code = "\n".join(lines) + "\n"
    return code


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(extract(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE}")
