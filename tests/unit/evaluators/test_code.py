"""pyright / mypy checks of generated code (real subprocesses; skipped when a checker is missing)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path

import anyio
import pytest

from assay.evaluators import MypyCheck, PyrightCheck
from assay.evaluators.code import extract_markdown_code, output_text
from assay.exceptions import ConfigError
from assay.traces.model import Trace

GOOD = "def add(a: int, b: int) -> int:\n    return a + b\n"
BAD = "def name(a: int) -> str:\n    return a\n"
MISSING_IMPORT = "import surely_not_installed_pkg\n\nx: int = 1\n"

needs_pyright = pytest.mark.skipif(shutil.which("pyright") is None, reason="pyright CLI not installed")
needs_mypy = pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy not installed")


# -- extraction ----------------------------------------------------------------------------------


def test_markdown_extraction_rules() -> None:
    text = "Here:\n```python\na = 1\n```\n```bash\nls\n```\n```json\n{}\n```\n```Python\nb = 2\n```\n"
    assert extract_markdown_code(text) == "a = 1\n\nb = 2\n"
    assert extract_markdown_code("  ```python\nx = 1\n  ```") is None  # fences must start at column 0
    assert extract_markdown_code("```c++\nint x;\n```") is None  # language tag must be \w*
    assert extract_markdown_code("no code") is None


def test_output_text_shapes() -> None:
    assert output_text("x") == "x"
    assert output_text({"content": "c"}) == "c"
    assert output_text({"messages": [{"role": "assistant", "content": "m"}]}) == "m"
    assert output_text(42) is None


def test_extractor_and_strategy_are_exclusive() -> None:
    with pytest.raises(ConfigError, match="code_extractor"):
        MypyCheck(code_extractor="os.path:basename", code_extraction="markdown_code_blocks")
    with pytest.raises(ConfigError, match="module:function"):
        MypyCheck(code_extractor="not_a_target")


# -- pyright -------------------------------------------------------------------------------------


@needs_pyright
def test_pyright_pass_fail_and_missing_imports() -> None:
    ev = PyrightCheck()
    assert ev.key == "pyright_succeeded"
    assert ev.evaluate(outputs=GOOD).score == 1.0
    r = ev.evaluate(outputs=BAD)
    assert r.score == 0.0 and "reportReturnType" in (r.comment or "") and r.metadata["errors"]
    assert ev.evaluate(outputs=MISSING_IMPORT).score == 1.0
    strict_imports = PyrightCheck(ignore_missing_imports=False)
    assert strict_imports.evaluate(outputs=MISSING_IMPORT).score == 0.0


# -- mypy ----------------------------------------------------------------------------------------


@needs_mypy
def test_mypy_pass_fail_and_args() -> None:
    ev = MypyCheck()
    assert ev.key == "mypy_succeeded"
    assert ev.evaluate(outputs=GOOD).score == 1.0
    r = ev.evaluate(outputs=BAD)
    assert r.score == 0.0 and "Incompatible return value" in (r.comment or "")
    assert ev.evaluate(outputs=MISSING_IMPORT).score == 1.0
    assert MypyCheck(ignore_missing_imports=False).evaluate(outputs=MISSING_IMPORT).score == 0.0
    # the default flags reject an untyped def called from typed code; --strict rejects untyped defs
    untyped = "def f(x):\n    return x\n"
    assert ev.evaluate(outputs=untyped).score == 1.0
    assert MypyCheck(cli_args=["--strict"]).evaluate(outputs=untyped).score == 0.0


@needs_mypy
def test_mypy_markdown_extraction_and_failure() -> None:
    ev = MypyCheck(code_extraction_strategy="markdown_code_blocks")  # the openevals spelling
    assert ev.evaluate(outputs=f"Sure:\n```python\n{GOOD}```\n").score == 1.0
    r = ev.evaluate(outputs="I cannot write code today.")
    assert r.score == 0.0 and r.metadata == {"code_extraction_failed": True}


@needs_mypy
def test_generated_code_is_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    code = f"open({str(marker)!r}, 'w').write('x')\n"
    assert MypyCheck().evaluate(outputs=code).score == 1.0
    assert not marker.exists()


@needs_mypy
def test_user_extractor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_extract.py").write_text("def grab(outputs):\n    return outputs.split('CODE:', 1)[1]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ev = MypyCheck(code_extractor="my_extract:grab")
    assert ev.evaluate(outputs="here you go CODE:" + BAD).score == 0.0


def test_timeout_kills_the_checker_and_gives_an_error() -> None:
    sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
    ev = MypyCheck(command=sleeper, timeout=0.5)
    start = time.monotonic()
    r = ev.evaluate(outputs=GOOD)
    assert time.monotonic() - start < 10
    assert r.score is None and r.error is not None and "longer than" in r.error


def test_unintelligible_checker_output_is_an_error_not_a_verdict() -> None:
    ev = PyrightCheck(command=[sys.executable, "-c", "print('garbage')"])
    r = ev.evaluate(outputs=GOOD)
    assert r.score is None and r.error is not None and "not understood" in r.error


@needs_mypy
def test_checks_run_concurrently_in_the_pipeline_path() -> None:
    ev = MypyCheck()
    traces = [Trace(final_output=GOOD if i % 2 == 0 else BAD) for i in range(4)]
    results: list[float | None] = [None] * len(traces)

    async def run_all() -> None:
        async def one(i: int) -> None:
            [r] = await ev.ascore_trace(traces[i])
            results[i] = r.score

        async with anyio.create_task_group() as tg:
            for i in range(len(traces)):
                tg.start_soon(one, i)

    anyio.run(run_all)
    assert results == [1.0, 0.0, 1.0, 0.0]


def test_stale_code_dirs_of_dead_processes_are_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from assay.evaluators import code

    monkeypatch.setattr(code.tempfile, "gettempdir", lambda: str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / f"assay-code-{dead.stdout.strip()}-abc").mkdir()
    (tmp_path / f"assay-code-{os.getpid()}-def").mkdir()  # ours: still in use
    assert code.sweep_stale_dirs() == 1
    assert [p.name for p in tmp_path.iterdir()] == [f"assay-code-{os.getpid()}-def"]
