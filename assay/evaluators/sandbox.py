"""Run untrusted Python in a child interpreter with limits: the machinery of ``code_execution``.

:func:`run_python` writes the code (and tests) into a fresh temporary directory (named like the
code checks' directories, so :func:`assay.evaluators.code.sweep_stale_dirs` removes what a killed
run leaves), starts ``python -I -B harness.py`` there in a new session with a scrubbed
environment, reads at most ``max_output_bytes`` of each output stream (the tail is kept), and
kills the whole process group when the wall-clock timeout passes or the caller is cancelled.

What is enforced by the kernel: the CPU, address-space, file-size and core limits
(``setrlimit`` in the child), the wall-clock kill, and — when ``unshare -n`` (or ``unshare -rn``
for an unprivileged user) works on this machine — a network namespace with no interfaces but a
downed loopback. What is best effort: the harness's audit hook refusing sockets, new processes,
``ctypes`` (only without a namespace) and writes outside the directory. The child runs as the
current user and can read whatever that user can read.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream

from assay.evaluators.code import CODE_DIR_PREFIX

#: Variables the child sees besides those given explicitly (no API keys, no proxies).
BASE_ENV = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"}


@dataclass(frozen=True, slots=True)
class Limits:
    """What one run may use."""

    timeout: float = 10.0
    memory_mb: int = 512
    max_file_mb: int = 16
    max_output_bytes: int = 64 * 1024
    allow_subprocess: bool = False


@dataclass(slots=True)
class RunOutcome:
    """What a run did: exit status, the captured tails, the harness report (None when the child
    died before writing it)."""

    returncode: int | None
    timed_out: bool
    stdout: str
    stderr: str
    report: dict[str, Any] | None
    output_truncated: bool = False
    network: str = "hook"


@functools.cache
def namespace_prefix() -> tuple[str, ...] | None:
    """The command prefix that gives the child an empty network namespace, or None when neither
    ``unshare -n`` nor ``unshare -rn`` works here (probed once per process)."""
    exe = shutil.which("unshare")
    if exe is None or not sys.platform.startswith("linux"):
        return None
    for flags in ("-n", "-rn"):
        try:
            done = subprocess.run([exe, flags, "true"], capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return (exe, flags)
    return None


class _Tail:
    """The last ``cap`` bytes of a stream, and whether anything was dropped."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buf = bytearray()
        self.dropped = False

    def add(self, chunk: bytes) -> None:
        self.buf += chunk
        if len(self.buf) > 2 * self.cap:
            del self.buf[: len(self.buf) - self.cap]
            self.dropped = True

    def text(self) -> str:
        if len(self.buf) > self.cap:
            del self.buf[: len(self.buf) - self.cap]
            self.dropped = True
        return self.buf.decode("utf-8", "replace")


async def _drain(stream: ByteReceiveStream | None, tail: _Tail) -> None:
    if stream is None:
        return
    try:
        async for chunk in stream:
            tail.add(chunk)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        return


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _prepare(code: str, tests: str | list[str] | None) -> str:
    workdir = tempfile.mkdtemp(prefix=f"{CODE_DIR_PREFIX}{os.getpid()}-")
    root = Path(workdir)
    (root / "solution.py").write_text(code, encoding="utf-8")
    if isinstance(tests, list):
        (root / "tests.json").write_text(json.dumps(tests), encoding="utf-8")
    elif tests is not None:
        (root / "tests.py").write_text(tests, encoding="utf-8")
    harness = resources.files("assay.evaluators").joinpath("sandbox_harness.py").read_text(encoding="utf-8")
    (root / "harness.py").write_text(harness, encoding="utf-8")
    return workdir


def _read_report(workdir: str) -> dict[str, Any] | None:
    try:
        report = json.loads(Path(workdir, "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


async def run_python(
    code: str,
    *,
    tests: str | list[str] | None = None,
    limits: Limits | None = None,
    env: dict[str, str] | None = None,
    python: str | None = None,
    network: str = "auto",
) -> RunOutcome:
    """Run ``code`` (then ``tests``) in a limited child interpreter; never raises for what the code
    does, only OSError when the interpreter cannot be started. ``network``: ``auto`` (a namespace
    when available, else the hook alone), ``namespace`` (required) or ``hook``."""
    lim = limits or Limits()
    prefix = await anyio.to_thread.run_sync(namespace_prefix) if network != "hook" else None
    if network == "namespace" and prefix is None:
        raise OSError("no network namespace available (unshare -n / -rn failed)")
    workdir = await anyio.to_thread.run_sync(_prepare, code, tests)
    config = {
        "limits": {
            "RLIMIT_CPU": int(lim.timeout) + 2,
            "RLIMIT_AS": lim.memory_mb * 1024 * 1024,
            "RLIMIT_FSIZE": lim.max_file_mb * 1024 * 1024,
            "RLIMIT_CORE": 0,
        },
        "allow_subprocess": lim.allow_subprocess,
        "block_ctypes": prefix is None,
    }
    command = [*(prefix or ()), python or sys.executable, "-I", "-B", "harness.py", json.dumps(config)]
    child_env = {**BASE_ENV, "HOME": workdir, "TMPDIR": workdir, **(env or {})}
    out, err = _Tail(lim.max_output_bytes), _Tail(lim.max_output_bytes)
    timed_out = False
    try:
        proc = await anyio.open_process(
            command, cwd=workdir, env=child_env, start_new_session=True, stdin=subprocess.DEVNULL
        )
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain, proc.stdout, out)
                tg.start_soon(_drain, proc.stderr, err)
                with anyio.move_on_after(lim.timeout) as scope:
                    await proc.wait()
                timed_out = scope.cancelled_caught
                _kill_group(proc.pid)  # also whatever it left behind holding the pipes open
        finally:
            with anyio.CancelScope(shield=True):
                _kill_group(proc.pid)
                await proc.aclose()
        report = None if timed_out else await anyio.to_thread.run_sync(_read_report, workdir)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(shutil.rmtree, workdir, True)
    return RunOutcome(
        returncode=None if timed_out else proc.returncode,
        timed_out=timed_out,
        stdout=out.text(),
        stderr=err.text(),
        report=report,
        output_truncated=out.dropped or err.dropped,
        network="namespace" if prefix else "hook",
    )


__all__ = ["BASE_ENV", "Limits", "RunOutcome", "namespace_prefix", "run_python"]
