"""The program the ``code_execution`` evaluator runs in its child interpreter.

It is never imported by assay: its source is written into the run's temporary directory and run
as ``python -I harness.py CONFIG_JSON`` inside the sandbox's namespaces (see
:mod:`assay.evaluators.sandbox`). In the child it

1. lowers the resource limits (``RLIMIT_CPU``, ``RLIMIT_AS``, ``RLIMIT_FSIZE``, ``RLIMIT_NPROC``,
   ``RLIMIT_CORE``);
2. installs an audit hook (:func:`sys.addaudithook`) that refuses sockets, process creation
   (unless allowed) and writes, removals and renames outside the working directory, with a
   clear message;
3. runs ``solution.py`` as ``__main__`` and then the tests (``tests.py`` or ``tests.json``) in the
   same namespace, and writes ``report.json``: ``{"ran", "error", "tests": [{name, passed,
   error}]}``.

The audit hook only makes accidents readable: code in the same interpreter can get around it
(``ctypes``) and can fake its own report. What holds is the kernel's: the namespaces (no host
filesystem but read-only system directories, no other process, no network), no capabilities,
and the resource limits.
"""

# This file must stay standard-library only and runnable on its own.
from __future__ import annotations

import json
import os
import resource
import sys
import traceback
from typing import Any

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_PATH_EVENTS = {  # event -> indexes of the path arguments
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.rename": (0, 1),
    "os.mkdir": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.symlink": (0, 1),
    "os.link": (0, 1),
    "os.truncate": (0,),
    "os.utime": (0,),
    "shutil.rmtree": (0,),
}
_PROCESS_EVENTS = (
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "pty.spawn",
)


def _limit(name: str, value: int) -> bool:
    """Lower one limit; False when this platform does not enforce it (macOS: RLIMIT_AS)."""
    which = getattr(resource, name, None)
    if which is None:
        return False
    try:
        _soft, hard = resource.getrlimit(which)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (cap, cap))
    except (ValueError, OSError):
        return False
    return True


def _inside(path: Any, root: str) -> bool:
    if isinstance(path, int):
        return True  # a file descriptor already open
    try:
        full = os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
        return False
    return full == root or full.startswith(root + os.sep) or full == os.devnull


def _install_hook(root: str, *, block_process: bool) -> None:
    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event.startswith("socket."):
            raise PermissionError(f"network access is disabled in this sandbox ({event})")
        if block_process and event.startswith(_PROCESS_EVENTS):
            raise PermissionError(f"starting processes is disabled in this sandbox ({event})")
        if event == "open" and len(args) >= 3:
            path, mode, flags = args[0], args[1], args[2]
            writing = (isinstance(flags, int) and flags & _WRITE_FLAGS) or (
                isinstance(mode, str) and any(c in mode for c in "wax+")
            )
            if writing and not _inside(path, root):
                raise PermissionError(f"writing outside the sandbox directory is disabled ({path!r})")
        elif event in _PATH_EVENTS:
            for i in _PATH_EVENTS[event]:
                if i < len(args) and args[i] is not None and not _inside(args[i], root):
                    raise PermissionError(f"changing files outside the sandbox directory is disabled ({event})")

    sys.addaudithook(hook)


def _print_tb(exc: BaseException) -> None:
    """The traceback without the harness's own frame (the user's code starts one frame in)."""
    tb = exc.__traceback__
    traceback.print_exception(type(exc), exc, tb.tb_next if tb is not None else None)


def _error_text(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()  # "SyntaxError: …", not the caret


def _run_tests(spec: Any, namespace: dict[str, Any]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    if isinstance(spec, list):  # one snippet per test case (e.g. assert statements)
        for i, snippet in enumerate(spec):
            name = f"tests[{i}]"
            results.append(_run_one(name, lambda s=str(snippet), n=name: exec(compile(s, n, "exec"), namespace)))
        return results
    before = dict(namespace)
    try:
        exec(compile(spec, "tests.py", "exec"), namespace)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        _print_tb(exc)
        return [{"name": "tests.py", "passed": False, "error": _error_text(exc)}]
    funcs = [
        (name, fn)
        for name, fn in namespace.items()
        if name.startswith("test") and callable(fn) and before.get(name) is not fn
    ]
    if not funcs:  # top-level asserts only: the module itself was the test
        return [{"name": "tests.py", "passed": True, "error": None}]
    return [_run_one(name, fn) for name, fn in funcs]


def _run_one(name: str, fn: Any) -> dict[str, Any]:
    try:
        fn()
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        _print_tb(exc)
        return {"name": name, "passed": False, "error": _error_text(exc)}
    return {"name": name, "passed": True, "error": None}


def main() -> int:
    cfg = json.loads(sys.argv[1])
    root = os.path.realpath(os.getcwd())
    unenforced = [name for name, value in cfg["limits"].items() if not _limit(name, int(value))]
    with open("solution.py", encoding="utf-8") as f:
        code = f.read()
    tests: Any = None
    if os.path.exists("tests.json"):
        with open("tests.json", encoding="utf-8") as f:
            tests = json.load(f)
    elif os.path.exists("tests.py"):
        with open("tests.py", encoding="utf-8") as f:
            tests = f.read()
    report_file = open("report.json", "w", encoding="utf-8")  # noqa: SIM115 - written at the end
    _install_hook(root, block_process=not cfg["allow_subprocess"])
    sys.argv = ["solution.py"]
    namespace: dict[str, Any] = {"__name__": "__main__", "__file__": os.path.join(root, "solution.py")}
    report: dict[str, Any] = {"ran": True, "error": None, "tests": None, "unenforced_limits": unenforced}
    status = 0
    try:
        exec(compile(code, "solution.py", "exec"), namespace)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            report.update(ran=False, error=f"SystemExit: {exc.code}")
            status = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:
        _print_tb(exc)
        report.update(ran=False, error=_error_text(exc))
        status = 1
    if report["ran"] and tests is not None:
        report["tests"] = _run_tests(tests, namespace)
        if not all(t["passed"] for t in report["tests"]):
            status = 2
    sys.stdout.flush()
    sys.stderr.flush()
    json.dump(report, report_file)
    report_file.close()
    return status


if __name__ == "__main__":
    os._exit(main())
