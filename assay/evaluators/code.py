"""Static type checks of generated Python code: ``pyright`` and ``mypy`` run as subprocesses.

The code is written to a file in a fresh temporary directory (the checker's working directory,
so no project config leaks in) and checked; it is **never executed**. Checks run concurrently
under a per-event-loop limiter sized to the CPU count, each with a timeout that kills the
checker.

Code extraction (openevals rules): ``none`` checks the whole output; ``markdown_code_blocks``
checks the fenced blocks (fences at column 0, language tag ``\\w*``; blocks tagged bash, sh,
shell, zsh, fish, console, terminal or json are skipped) joined by newlines, and scores 0 with
``metadata.code_extraction_failed`` when there are none; ``code_extractor`` names a user function
``"module:function"`` taking the output value and returning the code (None = extraction failed).

>>> import shutil
>>> ev = MypyCheck()
>>> ev.evaluate(outputs="def add(a: int, b: int) -> int:\\n    return a + b\\n").score  # doctest: +SKIP
1.0
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

import anyio
import orjson
from anyio.lowlevel import RunVar
from pydantic import AliasChoices, Field

from assay.evaluators.base import AsyncEvaluator, EvaluatorParams
from assay.exceptions import ConfigError
from assay.loading import load_callable
from assay.processes import pid_alive
from assay.records import Result
from assay.traces.model import Trace, content_text

SKIPPED_LANGUAGES = frozenset({"bash", "sh", "shell", "zsh", "fish", "console", "terminal", "json"})
_BLOCK = re.compile(r"^```(\w*)[^\S\n]*\n(.*?)^```[^\S\n]*$", re.MULTILINE | re.DOTALL)

_LIMITER: RunVar[anyio.CapacityLimiter] = RunVar("assay_code_check_limiter")


def code_check_limiter() -> anyio.CapacityLimiter:
    """The limiter shared by every code check in this event loop (CPU-count slots)."""
    try:
        return _LIMITER.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(os.cpu_count() or 1)
        _LIMITER.set(limiter)
        return limiter


def output_text(value: Any) -> str | None:
    """The text holding the code: a string, a message dict's ``content``, or None."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "content" in value:
            return content_text(value["content"])
        msgs = value.get("messages")
        if isinstance(msgs, list) and msgs and isinstance(msgs[-1], dict):
            return content_text(msgs[-1].get("content"))
    return None


def extract_markdown_code(text: str) -> str | None:
    """The fenced code blocks of a markdown text (shell and JSON blocks skipped), or None."""
    blocks = [m.group(2) for m in _BLOCK.finditer(text) if m.group(1) not in SKIPPED_LANGUAGES]
    return "\n".join(blocks) if blocks else None


def load_function(target: str | Callable[..., Any], what: str) -> Callable[..., Any]:
    """A callable, or one named ``"module:function"`` (ConfigError naming ``what`` otherwise)."""
    if callable(target):
        return target
    return load_callable(target, what)


def build_extractor(
    evaluator: str, code_extraction: str, code_extractor: str | Callable[..., Any] | None
) -> Callable[..., Any] | None:
    """The user extractor of an evaluator's params (ConfigError when combined with a strategy)."""
    if code_extractor is None:
        return None
    if code_extraction != "none":
        raise ConfigError(f"evaluator {evaluator!r}: params.code_extractor cannot be combined with code_extraction")
    return load_function(code_extractor, f"evaluator {evaluator!r}: params.code_extractor")


def extract_code(value: Any, code_extraction: str, extractor: Callable[..., Any] | None) -> str | None:
    """The code of an output value: the extractor's answer, the whole text, or its markdown blocks."""
    if extractor is not None:
        code = extractor(value)
        return code if isinstance(code, str) else None
    text = output_text(value)
    if text is None or code_extraction == "none":
        return text
    return extract_markdown_code(text)


class CodeExtractionParams(EvaluatorParams):
    """Where the code is in the output (shared by the code checks and ``code_execution``)."""

    code_extraction: Literal["none", "markdown_code_blocks"] = Field(
        "none", validation_alias=AliasChoices("code_extraction", "code_extraction_strategy")
    )
    """none: the whole output is code; markdown_code_blocks: the fenced blocks (openevals rules)."""
    code_extractor: str | Callable[..., Any] | None = None
    """A user function, ``"module:function"`` or (library use) a callable (output value -> code or
    None); excludes code_extraction."""


class CodeCheckParams(CodeExtractionParams):
    cli_args: list[str] | None = Field(
        None, validation_alias=AliasChoices("cli_args", "pyright_cli_args", "mypy_cli_args")
    )
    """Extra command-line arguments (None = the checker's defaults)."""
    ignore_missing_imports: bool = True
    """Do not report imports that cannot be resolved (the checker has no project environment)."""
    timeout: float = Field(60.0, gt=0)
    """Seconds one check may take; the checker is killed after that (an error result)."""
    command: list[str] | None = None
    """The checker command (default: ``pyright`` from PATH / ``python -m mypy``)."""


class CodeCheck(AsyncEvaluator[CodeCheckParams]):
    """Shared machinery: extraction, the temporary directory, the subprocess and its timeout."""

    Params = CodeCheckParams

    def setup(self) -> None:
        p = self.params
        self._extractor = build_extractor(self.name, p.code_extraction, p.code_extractor)
        self._command = p.command or self.default_command()

    def default_command(self) -> list[str]:
        raise NotImplementedError

    def build_args(self, path: str) -> list[str]:
        raise NotImplementedError

    def parse(self, stdout: str, returncode: int) -> list[str] | None:
        """The errors found, or None when the checker's output cannot be understood."""
        raise NotImplementedError

    def extract(self, value: Any) -> str | None:
        return extract_code(value, self.params.code_extraction, self._extractor)

    async def ascore(self, trace: Trace) -> Result:
        code = self.extract(trace.final_output)
        if code is None:
            return Result(self.key, 0.0, False, "no code found in the output", {"code_extraction_failed": True})
        async with code_check_limiter():
            workdir = await anyio.to_thread.run_sync(_prepare_dir, code)
            try:
                with anyio.fail_after(self.params.timeout):
                    proc = await anyio.run_process(
                        [*self._command, *self.build_args("python_file.py")],
                        cwd=workdir,
                        check=False,
                        env={**os.environ, "NO_COLOR": "1"},
                    )
            except TimeoutError:
                return Result.from_error(self.key, f"{self.name} took longer than {self.params.timeout}s")
            except OSError as exc:
                return Result.from_error(self.key, f"cannot run {self._command[0]!r}: {exc}")
            finally:
                await anyio.to_thread.run_sync(shutil.rmtree, workdir, True)
        stdout = proc.stdout.decode("utf-8", "replace")
        errors = self.parse(stdout, proc.returncode)
        if errors is None:
            detail = (stdout or proc.stderr.decode("utf-8", "replace")).strip()[:500]
            return Result.from_error(self.key, f"{self.name} output not understood (exit {proc.returncode}): {detail}")
        ok = not errors
        comment = "no type errors" if ok else "\n".join(errors)
        return Result(self.key, 1.0 if ok else 0.0, ok, comment, {"errors": errors})


CODE_DIR_PREFIX = "assay-code-"


def _prepare_dir(code: str) -> str:
    # the pid in the name lets a later run remove what a killed run left (sweep_stale_dirs)
    workdir = tempfile.mkdtemp(prefix=f"{CODE_DIR_PREFIX}{os.getpid()}-")
    Path(workdir, "python_file.py").write_text(code, encoding="utf-8")
    return workdir


def sweep_stale_dirs() -> int:
    """Remove the temporary directories of code checks whose process is gone (a run killed
    mid-check leaves them behind); returns how many were removed."""
    removed = 0
    root = Path(tempfile.gettempdir())
    for d in root.glob(f"{CODE_DIR_PREFIX}*-*"):
        pid = d.name[len(CODE_DIR_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or pid_alive(int(pid)):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed += 1
    return removed


class PyrightCheck(CodeCheck):
    """Type-check the generated code with pyright (``--level error``); pass when it finds no errors."""

    name: ClassVar[str] = "pyright"
    description: ClassVar[str] = "Type-check generated Python code with pyright (never executed)."
    example: ClassVar[dict[str, Any]] = {"code_extraction": "markdown_code_blocks"}

    def default_key(self) -> str:
        return "pyright_succeeded"

    def default_command(self) -> list[str]:
        exe = shutil.which("pyright")
        if exe is None:
            raise ConfigError(f"evaluator {self.name!r}: the pyright CLI is not installed (pip install 'assay[code]')")
        return [exe]

    def build_args(self, path: str) -> list[str]:
        return ["--outputjson", "--level", "error", *(self.params.cli_args or []), path]

    def parse(self, stdout: str, returncode: int) -> list[str] | None:
        try:
            report = orjson.loads(stdout)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(report, dict) or "generalDiagnostics" not in report:
            return None
        errors = []
        for d in report["generalDiagnostics"]:
            if d.get("severity") != "error":
                continue
            if self.params.ignore_missing_imports and d.get("rule") == "reportMissingImports":
                continue
            start = d.get("range", {}).get("start", {})
            where = f"{start.get('line', 0) + 1}:{start.get('character', 0) + 1}"
            rule = f" ({d['rule']})" if d.get("rule") else ""
            errors.append(f"{where}: {d.get('message', '')}{rule}")
        return errors


MYPY_DEFAULT_ARGS = ("--no-incremental", "--disallow-untyped-calls", "--disallow-incomplete-defs")
_MYPY_LINE = re.compile(r"^[^:\n]*\.py:(\d+):(?:(\d+):)? (error|note|warning): (.*)$")


class MypyCheck(CodeCheck):
    """Type-check the generated code with mypy; pass when it reports no errors."""

    name: ClassVar[str] = "mypy"
    description: ClassVar[str] = "Type-check generated Python code with mypy (never executed)."
    example: ClassVar[dict[str, Any]] = {"cli_args": ["--strict"]}

    def default_key(self) -> str:
        return "mypy_succeeded"

    def default_command(self) -> list[str]:
        import importlib.util

        if importlib.util.find_spec("mypy") is not None:
            return [sys.executable, "-m", "mypy"]
        exe = shutil.which("mypy")
        if exe is None:
            raise ConfigError(f"evaluator {self.name!r}: mypy is not installed (pip install 'assay[code]')")
        return [exe]

    def build_args(self, path: str) -> list[str]:
        args = list(MYPY_DEFAULT_ARGS if self.params.cli_args is None else self.params.cli_args)
        if self.params.ignore_missing_imports and "--ignore-missing-imports" not in args:
            args.append("--ignore-missing-imports")
        return [*args, "--cache-dir", ".mypy_cache", "--no-error-summary", "--no-pretty", path]

    def parse(self, stdout: str, returncode: int) -> list[str] | None:
        errors = []
        for line in stdout.splitlines():
            m = _MYPY_LINE.match(line)
            if m and m.group(3) == "error":
                errors.append(f"{m.group(1)}: {m.group(4)}")
        if returncode not in (0, 1) or (returncode == 1 and not errors):
            return None  # 2 = mypy itself failed (bad flags, crash)
        return errors
