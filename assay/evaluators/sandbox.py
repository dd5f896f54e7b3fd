"""Run untrusted Python in a child interpreter confined by Linux namespaces: the machinery of
``code_execution``.

:func:`run_python` writes the code (and tests) into a fresh temporary directory (named like the
code checks' directories, so :func:`assay.evaluators.code.sweep_stale_dirs` removes what a killed
run leaves) and starts ``python -I -B harness.py`` there through util-linux's ``unshare``, in new
mount, PID, network, IPC and UTS namespaces (plus a user namespace when assay is not root):

* the filesystem is a new root (a small read-only tmpfs) holding read-only binds of ``/usr``,
  the ``/bin``/``/lib`` links, a few ``/etc`` files the loader and libc read, a handful of
  ``/dev`` nodes, the interpreter's prefixes and site-packages — and the run's directory, the only
  writable place, at ``/sandbox`` (``/tmp`` points there; an interpreter directory under the host's
  ``/tmp`` is bound read-only at its path inside it, after it). Nothing else of the host (home directories, the
  project, ``/tmp``, other processes' files) exists for the child, whatever it calls (``open``,
  ``ctypes``, ``os`` primitives);
* ``/proc`` is the new PID namespace's: the parent and every other process of the host are
  invisible (no ``/proc/<ppid>/environ``); killing the namespace's first process kills all of it;
* the network namespace has no interfaces but a downed loopback;
* the code runs with no capabilities, ``no_new_privs`` and — when assay is root — as an unused
  uid (so ``RLIMIT_NPROC`` bounds a fork bomb and no file of a real user is its own);
* the environment holds only ``PATH``, ``LANG``, ``HOME``, ``TMPDIR`` and the variables given.

The harness adds kernel resource limits (CPU, address space, file size, processes, core) and an
audit hook that gives clear messages for accidents. Where the namespaces cannot be built (not
Linux, no ``unshare``, user namespaces disabled, a container forbidding them) nothing runs:
:func:`sandbox_unavailable` says why and ``code_execution`` refuses to build.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream

from assay.evaluators.code import CODE_DIR_PREFIX

#: Where the run's directory is inside the sandbox (the child's working directory, HOME, TMPDIR).
SANDBOX_DIR = "/sandbox"

#: Variables the child sees besides those given explicitly (no API keys, no proxies).
BASE_ENV = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin", "HOME": SANDBOX_DIR, "TMPDIR": SANDBOX_DIR}

#: Host paths bound read-only into the sandbox when they exist (directories and files; links
#: are recreated as links).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: The few /etc files the loader, libc and Python read, copied into the new root (a directory
#: of links, like /etc/alternatives, is copied as links); nothing else of /etc is there.
ETC_COPIES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/mime.types",
    "/etc/alternatives",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom")

#: The uids a root assay gives its sandboxes: unused by any account (one per run, so the
#: process limit of one run is not shared with another).
_UID_BASE = 1_900_000_000
_UID_SPAN = 100_000_000
_uid_counter = itertools.count()

# Runs inside the new namespaces, as their root, before the code: mounts the binds on the
# skeleton the parent made (``_make_base``), pivots into it, makes it read-only, drops every
# privilege and execs the interpreter. Arguments: NEWROOT WORKDIR UID (``-`` = stay uid 0 of the
# user namespace), then ``-d DIR`` / ``-f FILE`` (read-only binds) / ``-c DEVICE`` specs, ``--``,
# the directories bound read-only after the run's directory (those under ``/tmp``), ``--``, the command.
_SETUP = r"""
set -eu
child_path=$PATH
PATH=/usr/sbin:/usr/bin:/sbin:/bin
setpriv=$(command -v setpriv)
new=$1 work=$2 uid=$3
shift 3
mount --bind "$new" "$new"
while [ "$1" != -- ]; do
  case $1 in
    -d|-f) mount -o bind,ro,nosuid,nodev "$2" "$new$2" ;;
    -c) mount -o bind,nosuid "$2" "$new$2" ;;
    *) echo "assay sandbox: bad spec $1" >&2; exit 125 ;;
  esac
  shift 2
done
shift
mount -t proc -o nosuid,nodev,noexec proc "$new/proc" 2>/dev/null || true
mount -t tmpfs -o mode=1777,size=16m,nosuid,nodev shm "$new/dev/shm"
mount -o bind,nosuid,nodev "$work" "$new/sandbox"
# directories under /tmp (a link to /sandbox): bound inside the run's directory, now that it is there
while [ "$1" != -- ]; do
  mkdir -p "$new$1"
  mount -o bind,ro,nosuid,nodev "$1" "$new$1"
  shift
done
shift
cd "$new"
pivot_root . .
umount -l .
cd /
mount -o remount,bind,ro,nosuid,nodev /
cd /sandbox
export PATH="$child_path"
unset OLDPWD
if [ "$uid" = - ]; then
  exec "$setpriv" --bounding-set=-all --inh-caps=-all --no-new-privs --pdeathsig KILL -- "$@"
fi
exec "$setpriv" --reuid="$uid" --regid="$uid" --clear-groups --bounding-set=-all --inh-caps=-all --no-new-privs \
  --pdeathsig KILL -- "$@"
"""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one run may use."""

    timeout: float = 10.0
    memory_mb: int = 512
    max_file_mb: int = 16
    max_output_bytes: int = 64 * 1024
    allow_subprocess: bool = False
    max_processes: int = 32


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
    network: str = "namespace"


class SandboxUnavailable(OSError):
    """The namespaces the sandbox needs cannot be built on this machine."""


#: What an interpreter is asked about itself (with ``-I``: no user site, no environment).
_ASK_PREFIXES = (
    "import json, site, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,"
    " sys.executable, *site.getsitepackages()]))"
)


@functools.cache
def _reported_dirs(python: str) -> tuple[str, ...]:
    """The prefixes and site-packages directories ``python`` reports about itself (for assay's own
    interpreter, ``sys`` and ``site`` here; for another, one ``python -I -c`` run, once per process;
    nothing when it cannot be asked: the trial run then says why it cannot start)."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        import site

        paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, sys.executable]
        return tuple(paths + list(site.getsitepackages()))
    try:
        done = subprocess.run(
            [python, "-I", "-c", _ASK_PREFIXES], capture_output=True, timeout=30, check=False, env=dict(BASE_ENV)
        )
        reported = json.loads(done.stdout) if done.returncode == 0 else []
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return ()
    return tuple(p for p in reported if isinstance(p, str) and p) if isinstance(reported, list) else ()


def _interpreter_dirs(python: str) -> list[str]:
    """The directories an interpreter needs, wherever they live (under ``/tmp`` too: a virtual
    environment made by CI or by Airflow's ``PythonVirtualenvOperator``): the installation prefix
    of the path it is started as and of the binary it really is, and the prefixes, base prefixes
    and site-packages directories it reports (a virtual environment's base installation)."""
    reported = _reported_dirs(python)
    prefixes, executable, site_dirs = reported[:4], reported[4:5], reported[5:]
    executables = [python, *executable]
    executables += [os.path.realpath(exe) for exe in executables]
    dirs = [os.path.dirname(os.path.dirname(os.path.abspath(exe))) for exe in executables]
    return [*dirs, *prefixes, *site_dirs]


def _after_sandbox(path: str) -> bool:
    """Whether ``path`` lies under the new root's ``/tmp`` (a link to the run's directory) or
    ``/sandbox``: such a directory is bound after the run's directory, inside it."""
    return any(path == top or path.startswith(top + "/") for top in ("/tmp", SANDBOX_DIR))


def bind_specs(python: str) -> list[tuple[str, str, str]]:
    """What the new root holds, as ``(kind, path, link target)``: ``d`` a directory and ``f`` a
    file bound read-only, ``c`` a device bound as is, ``l`` a link made as on the host, ``t`` a
    directory bound read-only after the run's directory (one under ``/tmp``, which is a link to
    it) — the system paths, the devices and the interpreter's directories (those that exist; none
    twice, none inside another)."""
    specs: list[tuple[str, str, str]] = []
    covered: list[str] = []

    def under(path: str) -> bool:
        return any(path == c or path.startswith(c.rstrip("/") + "/") for c in covered)

    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            specs.append(("l", path, os.readlink(path)))
        elif os.path.isdir(path):
            specs.append(("d", path, ""))
            covered.append(path)
        elif os.path.isfile(path):
            specs.append(("f", path, ""))
    specs += [("c", dev, "") for dev in DEVICES if os.path.exists(dev)]
    extra: set[str] = set()
    for d in _interpreter_dirs(python):
        for path in (os.path.abspath(d), os.path.realpath(d)):
            if path != "/" and os.path.isdir(path) and not os.path.islink(path):
                extra.add(path)
    for path in sorted(extra):
        if not under(path):
            specs.append(("t" if _after_sandbox(path) else "d", path, ""))
            covered.append(path)
    return specs


def _copy_etc(root: str) -> None:
    for path in ETC_COPIES:
        inside = root + path
        os.makedirs(os.path.dirname(inside), exist_ok=True)
        if os.path.islink(path):
            os.symlink(os.readlink(path), inside)
        elif os.path.isdir(path):
            os.mkdir(inside)
            with os.scandir(path) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        os.symlink(os.readlink(entry.path), os.path.join(inside, entry.name))
        elif os.path.isfile(path):
            with contextlib.suppress(OSError):
                shutil.copyfile(path, inside)


def _skeleton(root: str, specs: list[tuple[str, str, str]]) -> list[str]:
    """Make the new root's mount points, links and /etc copies under ``root``; the setup
    script's spec arguments (up to and including the ``--`` ending the late binds)."""
    args: list[str] = []
    late: list[str] = []
    for name in ("proc", "dev/shm", "sandbox"):
        os.makedirs(os.path.join(root, name), exist_ok=True)
    os.symlink("sandbox", os.path.join(root, "tmp"))
    _copy_etc(root)
    for kind, path, target in specs:
        inside = root + path
        if kind == "t":
            late.append(path)  # its mount point is made in the run's directory, by the setup script
            continue
        if kind == "l":
            os.makedirs(os.path.dirname(inside), exist_ok=True)
            os.symlink(target, inside)
            continue
        if kind == "d":
            os.makedirs(inside, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(inside), exist_ok=True)
            Path(inside).touch()
        args += [f"-{kind}", path]
    return [*args, "--", *late, "--"]


def _sandbox_uid() -> int:
    return _UID_BASE + (os.getpid() * 1000 + next(_uid_counter) % 1000) % _UID_SPAN


def _command(base: str, uid: int | None, spec_args: list[str], python: str, argv: Iterable[str]) -> list[str]:
    """The ``unshare`` command line running ``python argv`` in the sandbox made by
    :func:`_make_base` (``base/root`` the new root's skeleton, ``base/work`` the run's directory)."""
    unshare = _which_system("unshare") or "unshare"
    # SIGKILL to unshare when assay dies (even by kill -9); unshare's --kill-child then kills the
    # namespace's first process, and with it every process of the namespace
    orphan_guard = [_which_system("setpriv") or "setpriv", "--pdeathsig", "KILL"]
    user = [] if uid is not None else ["--user", "--map-root-user"]
    namespaces = ["--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--net", "--ipc", "--uts"]
    root, work = os.path.join(base, "root"), os.path.join(base, "work")
    setup = ["/bin/sh", "-c", _SETUP, "assay-sandbox", root, work, "-" if uid is None else str(uid)]
    return [*orphan_guard, unshare, *user, *namespaces, "--", *setup, *spec_args, python, *argv]


def _make_base(python: str) -> tuple[str, int | None, list[str]]:
    """A fresh directory holding the new root's skeleton (``root``) and the run's directory
    (``work``); the uid the code runs as (None: uid 0 of a user namespace, when assay is not
    root); the setup script's spec arguments."""
    base = tempfile.mkdtemp(prefix=f"{CODE_DIR_PREFIX}{os.getpid()}-")
    os.mkdir(os.path.join(base, "work"))
    spec_args = _skeleton(os.path.join(base, "root"), bind_specs(python))
    uid = _sandbox_uid() if os.geteuid() == 0 else None
    return base, uid, spec_args


def _give(base: str, uid: int | None) -> None:
    """Hand the run's directory and its files to the sandbox's uid (a root assay only)."""
    if uid is None:
        return
    work = Path(base, "work")
    for path in [work, *work.iterdir()]:
        os.chown(path, uid, uid)


@functools.cache
def sandbox_unavailable(python: str | None = None) -> str | None:
    """Why the sandbox cannot be built here (None when it can): a trial run of the interpreter
    in the namespaces, once per process and interpreter."""
    if not sys.platform.startswith("linux"):
        return f"it needs Linux namespaces and this is {sys.platform}"
    missing = [tool for tool in ("unshare", "setpriv", "mount", "pivot_root") if _which_system(tool) is None]
    if missing:
        return f"util-linux tools not found: {', '.join(missing)} (apt-get install util-linux mount)"
    exe = python or sys.executable
    base, uid, spec_args = _make_base(exe)
    try:
        _give(base, uid)
        probe = "import os; assert os.getppid() == 0, 'not in a new PID namespace'"
        command = _command(base, uid, spec_args, exe, ["-I", "-B", "-c", probe])
        try:
            done = subprocess.run(
                command, capture_output=True, timeout=30, check=False, env=dict(BASE_ENV), start_new_session=True
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unshare could not be run: {exc}"
        if done.returncode != 0:
            detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
            why = detail[-1] if detail else f"exit status {done.returncode}"
            who = "root" if uid is not None else "an unprivileged user (user namespaces needed)"
            return f"unshare failed as {who}: {why}"
        return None
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _which_system(tool: str) -> str | None:
    return shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin")


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


def _prepare(code: str, tests: str | list[str] | None, python: str) -> tuple[str, int | None, list[str]]:
    base, uid, spec_args = _make_base(python)
    root = Path(base, "work")
    (root / "solution.py").write_text(code, encoding="utf-8")
    if isinstance(tests, list):
        (root / "tests.json").write_text(json.dumps(tests), encoding="utf-8")
    elif tests is not None:
        (root / "tests.py").write_text(tests, encoding="utf-8")
    harness = resources.files("assay.evaluators").joinpath("sandbox_harness.py").read_text(encoding="utf-8")
    (root / "harness.py").write_text(harness, encoding="utf-8")
    _give(base, uid)
    return base, uid, spec_args


def _read_report(base: str) -> dict[str, Any] | None:
    try:
        report = json.loads(Path(base, "work", "report.json").read_text(encoding="utf-8"))
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
) -> RunOutcome:
    """Run ``code`` (then ``tests``) in the sandbox; never raises for what the code does, only
    :class:`SandboxUnavailable` when the namespaces cannot be built here and OSError when the
    child cannot be started."""
    lim = limits or Limits()
    exe = python or sys.executable
    why = await anyio.to_thread.run_sync(sandbox_unavailable, python)
    if why is not None:
        raise SandboxUnavailable(f"the code sandbox cannot be built here: {why}")
    base, uid, spec_args = await anyio.to_thread.run_sync(_prepare, code, tests, exe)
    config = {
        "limits": {
            "RLIMIT_CPU": int(lim.timeout) + 2,
            "RLIMIT_AS": lim.memory_mb * 1024 * 1024,
            "RLIMIT_FSIZE": lim.max_file_mb * 1024 * 1024,
            "RLIMIT_NPROC": lim.max_processes,
            "RLIMIT_CORE": 0,
        },
        "allow_subprocess": lim.allow_subprocess,
    }
    command = _command(base, uid, spec_args, exe, ["-I", "-B", "harness.py", json.dumps(config)])
    child_env = {**BASE_ENV, **(env or {})}
    out, err = _Tail(lim.max_output_bytes), _Tail(lim.max_output_bytes)
    timed_out = False
    try:
        proc = await anyio.open_process(command, env=child_env, start_new_session=True, stdin=subprocess.DEVNULL)
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
        report = None if timed_out else await anyio.to_thread.run_sync(_read_report, base)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(shutil.rmtree, base, True)
    return RunOutcome(
        returncode=None if timed_out else proc.returncode,
        timed_out=timed_out,
        stdout=out.text(),
        stderr=err.text(),
        report=report,
        output_truncated=out.dropped or err.dropped,
    )


__all__ = [
    "BASE_ENV",
    "SANDBOX_DIR",
    "Limits",
    "RunOutcome",
    "SandboxUnavailable",
    "bind_specs",
    "run_python",
    "sandbox_unavailable",
]
