"""code_execution: generated code runs in a sandbox of Linux namespaces (real subprocesses,
hostile code included)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.evaluators import CodeExecution
from assay.evaluators.sandbox import BASE_ENV, Limits, _command, _skeleton, bind_specs, run_python
from assay.exceptions import ConfigError
from assay.registry import build_evaluator
from tests.support.sandbox import require_sandbox


@pytest.fixture(autouse=True)
def _needs_sandbox() -> None:
    require_sandbox()


def test_code_that_runs_passes() -> None:
    r = CodeExecution().evaluate(outputs="x = sum(range(10))\nprint(x)\n")
    assert (r.key, r.score, r.value) == ("execution_succeeded", 1.0, True)
    assert r.metadata["stdout"] == "45\n"
    assert r.metadata["returncode"] == 0


def test_code_that_raises_fails_with_the_stderr_tail() -> None:
    r = CodeExecution().evaluate(outputs="def f():\n    raise ValueError('boom')\nf()\n")
    assert r.score == 0.0 and r.value is False
    assert r.comment.startswith("Command exited with code 1 and error:")
    assert "ValueError: boom" in r.comment and 'File "solution.py", line 3' in r.comment
    assert "harness" not in r.comment  # the harness frame is not shown


def test_nonzero_exit_fails_and_exit_zero_passes() -> None:
    ev = CodeExecution()
    assert ev.evaluate(outputs="import sys\nsys.exit(3)").score == 0.0
    assert ev.evaluate(outputs="import sys\nsys.exit(0)").score == 1.0


@pytest.mark.parametrize("code", ["while True:\n    pass\n", "import time\ntime.sleep(60)\n"])
def test_infinite_loop_hits_the_timeout(code: str) -> None:
    r = CodeExecution(timeout=1).evaluate(outputs=code)
    assert r.score == 0.0 and r.metadata["timed_out"] is True
    assert "timed out after 1s" in r.comment


def test_memory_bomb_hits_the_limit() -> None:
    r = CodeExecution(memory_mb=256).evaluate(outputs="blocks = [bytearray(64 * 1024 * 1024) for _ in range(64)]\n")
    assert r.score == 0.0
    assert "MemoryError" in r.comment


@pytest.fixture
def listener() -> Iterator[int]:
    """A loopback TCP server the code tries to reach; counts connections accepted."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            accepted.append(conn)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join()
    srv.close()
    assert accepted == []  # nothing ever got through


def test_network_attempt_fails(listener: int) -> None:
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {listener}), timeout=2).sendall(b'x')\n"
    r = CodeExecution().evaluate(outputs=code)
    assert r.score == 0.0
    assert r.metadata["network"] == "namespace"


def test_namespace_cuts_the_network_past_the_hook(listener: int) -> None:
    """The kernel guarantee, without the audit hook: a raw connect through libc fails."""
    code = f"""
import ctypes, struct
libc = ctypes.CDLL("libc.so.6", use_errno=True)
fd = libc.socket(2, 1, 0)
addr = struct.pack("!HH4s8x", 2, {listener}, bytes([127, 0, 0, 1]))
addr = struct.pack("=H", 2) + addr[2:]
rc = libc.connect(fd, addr, len(addr))
assert rc != 0, "connected"
print("connect refused, errno", ctypes.get_errno())
"""
    r = CodeExecution(network="auto").evaluate(outputs=code)
    assert r.score == 1.0, r.comment
    assert "connect refused" in r.metadata["stdout"]


SECRET = "sk-assay-fake-parent-secret-7f3a"


def test_hostile_code_cannot_read_the_parents_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key of the run's judge is in assay's environment: neither /proc/<ppid>/environ nor any
    other process's environment (by its host pid) is reachable from the code."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    code = f"""
import glob, os
paths = [f"/proc/{{os.getppid()}}/environ", "/proc/{os.getpid()}/environ", *glob.glob("/proc/*/environ")]
found, readable = [], 0
for path in paths:
    try:
        data = open(path, "rb").read()
    except OSError:
        continue
    readable += 1
    if b"sk-assay" in data:
        found.append(path)
print("ppid", os.getppid(), "pids", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
print("found", found, "readable", readable)
print(open("/proc/{os.getpid()}/environ", "rb").read())
"""
    r = CodeExecution().evaluate(outputs=code)
    everything = json.dumps(r.metadata) + (r.comment or "")
    assert SECRET not in everything
    assert "ppid 0 pids [1]" in r.metadata["stdout"]  # only itself: a PID namespace of its own
    assert "found []" in r.metadata["stdout"]
    assert r.score == 0.0 and "FileNotFoundError" in r.comment  # the parent's pid does not exist here


def test_hostile_code_cannot_write_or_read_outside_through_ctypes(tmp_path: Path) -> None:
    """libc's fopen/open bypass the audit hook; the mount namespace is what holds."""
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    targets = [tmp_path / "escaped.txt", Path("/usr/assay-escaped.txt"), Path("/assay-escaped.txt")]
    code = f"""
import ctypes, os
libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.fopen.restype = ctypes.c_void_p
for path in {[str(t) for t in targets]!r} + ["../assay-escaped.txt"]:
    f = libc.fopen(path.encode(), b"w")
    if f:
        libc.fputs(b"escaped", ctypes.c_void_p(f))
        libc.fclose(ctypes.c_void_p(f))
        print("WROTE", path)
    fd = libc.open(path.encode(), os.O_WRONLY | os.O_CREAT, 0o644)
    print("open", path, fd, os.strerror(ctypes.get_errno()))
print("read", os.path.exists({str(secret)!r}), os.path.exists({str(tmp_path)!r}))
print("root", sorted(os.listdir("/")))
"""
    r = CodeExecution().evaluate(outputs=code)
    assert r.score == 1.0, r.comment
    out = r.metadata["stdout"]
    assert "WROTE" not in out, out
    assert "read False False" in out  # the host's files are not there at all
    assert all(not t.exists() for t in targets)
    assert not Path("/assay-escaped.txt").exists() and not Path(tmp_path.parent, "assay-escaped.txt").exists()
    assert "'sandbox'" in out and "'work'" not in out and "'home'" not in out


def test_fork_bomb_is_bounded_and_leaves_nothing_behind() -> None:
    token = "ASSAY_FORK_BOMB=1"
    code = """
import ctypes, os, time
libc = ctypes.CDLL("libc.so.6", use_errno=True)
n = 0
while n < 10000:
    pid = libc.fork()  # past the audit hook
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    if pid < 0:
        break
    n += 1
print("forked", n, "then", os.strerror(ctypes.get_errno()))
"""
    r = CodeExecution(max_processes=8, timeout=20, environment_variables=dict([token.split("=")])).evaluate(
        outputs=code
    )
    assert r.score == 1.0 and r.metadata["timed_out"] is False, r.comment
    forked = int(r.metadata["stdout"].split()[1])
    assert forked < 8  # the process limit stopped it before the bomb's 8th child (the interpreter is one)
    assert "Resource temporarily unavailable" in r.metadata["stdout"]
    assert _processes_with(token) == []  # the namespace's children died with it


def test_hostile_code_cannot_signal_the_host() -> None:
    host = subprocess.Popen(["sleep", "30"])
    try:
        code = "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError as e:\n    print(e)\n"
        code += f"os.kill({host.pid}, signal.SIGKILL)\n"
        r = CodeExecution().evaluate(outputs=code)
        assert r.score == 0.0 and "ProcessLookupError" in r.comment  # the host's pids do not exist there
        assert host.poll() is None
    finally:
        host.kill()
        host.wait()


@pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/usr/bin/python3").exists(), reason="needs root and /usr/bin/python3"
)
def test_unprivileged_user_gets_the_same_sandbox_through_a_user_namespace() -> None:
    """The path a non-root assay takes (unshare --user --map-root-user), run as nobody (pytest's
    tmp_path is root's alone: the directory is made where nobody can reach it)."""
    base = Path(tempfile.mkdtemp(prefix="assay-sandbox-test-"))
    try:
        _run_as_nobody(base)
    finally:
        shutil.rmtree(base)


def _run_as_nobody(base: Path, python: str = "/usr/bin/python3") -> None:
    (base / "work").mkdir()
    spec_args = _skeleton(str(base / "root"), bind_specs(python))
    for d in (base, base / "work"):
        shutil.chown(d, 65534, 65534)
    probe = "import os\ncaps = open('/proc/self/status').read().split('CapEff:')[1].split()[0]\n"
    probe += "print(os.getuid(), os.getppid(), caps)\n"
    probe += "open('/sandbox/ok', 'w').write('1')\n"
    probe += "try:\n    open('/usr/x', 'w')\nexcept OSError as e:\n    print(e.strerror)\n"
    command = _command(str(base), None, spec_args, python, ["-I", "-c", probe])
    setpriv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    done = subprocess.run([*setpriv, *command], capture_output=True, text=True, env=dict(BASE_ENV), timeout=60)
    if done.returncode != 0 and "unshare" in done.stderr and "Operation not permitted" in done.stderr:
        pytest.skip(f"unprivileged user namespaces are disabled here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "0", "0000000000000000", "Read-only", "file", "system"]
    assert (base / "work" / "ok").read_text() == "1"


def _venv_under_tmp(python: str) -> Iterator[Path]:
    """A virtual environment of ``python`` under /tmp, as CI or Airflow's ``PythonVirtualenvOperator``
    makes one (seeing that interpreter's packages; readable by nobody too)."""
    base = Path(tempfile.mkdtemp(prefix="assay-venv-test-", dir="/tmp"))
    base.chmod(0o755)
    try:
        command = [python, "-m", "venv", "--system-site-packages", "--without-pip", str(base / "venv")]
        subprocess.run(command, check=True, capture_output=True, timeout=120)
        yield base / "venv"
    finally:
        shutil.rmtree(base)


@pytest.fixture(scope="module")
def venv_under_tmp() -> Iterator[Path]:
    yield from _venv_under_tmp(sys.executable)


CHECK_PREFIX = (
    "import sys, os, yaml\n"
    "print(sys.prefix)\n"
    "try:\n    open(os.path.join(sys.prefix, 'x'), 'w')\nexcept OSError as e:\n    print(e.strerror)\n"
)


def test_an_interpreter_under_tmp_runs_with_its_prefixes_read_only(venv_under_tmp: Path) -> None:
    """The sandbox's /tmp is the run's directory; a venv under the host's /tmp is bound into it."""
    python = str(venv_under_tmp / "bin" / "python3")
    r = CodeExecution(python=python).evaluate(outputs=CHECK_PREFIX, tests="assert sys.prefix != sys.base_prefix")
    assert r.score == 1.0, r.comment
    assert r.metadata["stdout"].splitlines() == [str(venv_under_tmp), "Read-only file system"]
    assert not (venv_under_tmp / "x").exists()


def test_assay_running_from_a_venv_under_tmp_runs_code(venv_under_tmp: Path, tmp_path: Path) -> None:
    """assay itself started from a venv under /tmp (its own interpreter is the default ``python``)."""
    records = tmp_path / "in.jsonl"
    records.write_text(json.dumps({"inputs": "q", "outputs": CHECK_PREFIX}) + "\n")
    out = tmp_path / "out.jsonl"
    cli = "import sys; from assay.cli import main; sys.argv[0] = 'assay'; main()"
    argv = ["score", str(records), "-e", "code_execution", "-o", str(out), "-q"]
    done = subprocess.run(
        [str(venv_under_tmp / "bin" / "python3"), "-c", cli, *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())["results"]["execution_succeeded"]
    assert result["score"] == 1.0, result["comment"]
    assert result["metadata"]["stdout"].splitlines() == [str(venv_under_tmp), "Read-only file system"]


@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="needs the system's /usr/bin/python3")
def test_unprivileged_user_runs_an_interpreter_under_tmp() -> None:
    """The user-namespace path with a venv under /tmp (of the system's python: nobody can run it)."""
    for venv in _venv_under_tmp("/usr/bin/python3"):
        base = Path(tempfile.mkdtemp(prefix="assay-sandbox-test-"))
        try:
            _run_as_nobody(base, str(venv / "bin" / "python3"))
        finally:
            shutil.rmtree(base)


def test_no_sandbox_no_run() -> None:
    with pytest.raises(ConfigError, match="the code sandbox cannot be built here, so no generated code is run"):
        CodeExecution(python="/nonexistent/bin/python3")


def test_tests_in_the_record_asserts_functions_and_lists() -> None:
    ev = CodeExecution()
    good, bad = "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"
    assert ev.evaluate(outputs=good, tests="assert add(1, 2) == 3").score == 1.0
    r = ev.evaluate(outputs=bad, tests="assert add(1, 2) == 3")
    assert r.score == 0.0 and r.metadata["tests_passed"] == 0
    funcs = "def test_one():\n    assert add(1, 2) == 3\n\ndef test_zero():\n    assert add(0, 0) == 0\n"
    r = ev.evaluate(outputs=bad, tests=funcs)
    assert (r.score, r.metadata["tests_passed"], r.metadata["tests_total"]) == (0.0, 1, 2)
    assert "test_one: AssertionError" in r.comment
    r = CodeExecution(test_scoring="fraction").evaluate(outputs=bad, tests=funcs)
    assert r.score == 0.5 and r.value is False
    r = ev.evaluate(outputs=good, tests=["assert add(1, 2) == 3", "assert add(2, 2) == 4"])
    assert (r.score, r.comment) == (1.0, "2/2 tests passed")
    r = ev.evaluate(outputs=good, tests=["assert add(1, 2) == 3", "assert add(("])
    assert r.score == 0.0 and "tests[1]: SyntaxError" in r.comment


def test_code_failing_before_the_tests_fails_and_early_exit_does_not_skip_them() -> None:
    ev = CodeExecution()
    r = ev.evaluate(outputs="raise RuntimeError('x')", tests="assert len('ab') == 2")  # would pass if run
    assert (r.score, r.metadata["ran"], r.metadata["returncode"]) == (0.0, False, 1)
    assert "RuntimeError: x" in r.comment and "tests_passed" not in r.metadata  # the tests never ran
    r = ev.evaluate(outputs="x = 1", tests="assert x == 1")
    assert (r.score, r.metadata["ran"], r.metadata["tests_passed"]) == (1.0, True, 1)
    r = ev.evaluate(outputs="import os\nos._exit(0)", tests="assert False")
    assert r.score == 0.0 and r.comment == "the tests did not run to completion"


def test_secret_in_the_environment_is_not_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    code = "import os, sys\nprint(sorted(os.environ))\nassert 'OPENAI_API_KEY' not in os.environ\n"
    code += "assert not any('secret' in v for v in os.environ.values())\n"
    r = CodeExecution().evaluate(outputs=code)
    assert r.score == 1.0, r.comment
    given = CodeExecution(environment_variables={"MY_FLAG": "1"})
    assert given.evaluate(outputs="import os\nassert os.environ['MY_FLAG'] == '1'").score == 1.0


def test_writes_outside_the_directory_and_processes_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "escaped.txt"
    r = CodeExecution().evaluate(outputs=f"open({str(target)!r}, 'w').write('x')")
    assert r.score == 0.0 and not target.exists()
    r = CodeExecution().evaluate(outputs="open('/etc/escaped', 'w').write('x')")
    assert r.score == 0.0 and "writing outside the sandbox directory is disabled" in r.comment
    assert CodeExecution().evaluate(outputs="open('inside.txt', 'w').write('ok')").score == 1.0
    assert CodeExecution().evaluate(outputs="open('/tmp/inside.txt', 'w').write('ok')").score == 1.0
    r = CodeExecution().evaluate(outputs="import subprocess\nsubprocess.run(['true'])")
    assert r.score == 0.0 and "starting processes is disabled" in r.comment
    allowed = CodeExecution(allow_subprocess=True)
    assert allowed.evaluate(outputs="import subprocess\nsubprocess.run(['true'])").score == 1.0


def test_output_is_capped_and_files_are_limited() -> None:
    r = CodeExecution(max_output_bytes=1024).evaluate(outputs="print('x' * 5_000_000)\nprint('end')")
    assert r.score == 1.0 and r.metadata["output_truncated"] is True
    assert r.metadata["stdout"].endswith("end\n") and len(r.metadata["stdout"]) <= 1024
    r = CodeExecution(max_file_mb=1).evaluate(outputs="open('big', 'wb').write(b'x' * 4_000_000)")
    assert r.score == 0.0


def test_markdown_extraction_and_no_code() -> None:
    ev = CodeExecution(code_extraction_strategy="markdown_code_blocks")
    assert ev.evaluate(outputs="Here:\n```python\nprint('hi')\n```\n```bash\nrm -rf /\n```\n").score == 1.0
    r = ev.evaluate(outputs="no code here")
    assert r.score == 0.0 and r.metadata["code_extraction_failed"] is True


def test_concurrent_runs_do_not_block_the_loop() -> None:
    ev = CodeExecution(timeout=5)

    async def main() -> list[float | None]:
        scores: list[float | None] = []
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await anyio.sleep(0.01)
                ticks += 1

        async def one() -> None:
            r = await ev.aevaluate(outputs="import time\ntime.sleep(0.3)")
            scores.append(r.score)

        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            async with anyio.create_task_group() as runs:
                for _ in range(4):
                    runs.start_soon(one)
            tg.cancel_scope.cancel()
        assert ticks >= 10  # the loop kept running while the children slept
        return scores

    assert anyio.run(main) == [1.0] * 4


def _processes_with(token: str) -> list[int]:
    pids = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if token.encode() in environ.read_bytes():
                pids.append(int(environ.parent.name))
        except OSError:
            continue
    return pids


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_cancellation_kills_the_child() -> None:
    token = "ASSAY_SANDBOX_TEST_TOKEN=cancel-me"

    async def main() -> None:
        with anyio.fail_after(5):
            with anyio.move_on_after(0.5):
                await run_python("import time\ntime.sleep(30)", limits=Limits(timeout=30), env=dict([token.split("=")]))
            assert _processes_with(token) == []

    anyio.run(main)


def test_bad_params_and_registry() -> None:
    ev = build_evaluator("code_execution", {"timeout": 2})
    assert isinstance(ev, CodeExecution) and ev.key == "execution_succeeded"
    with pytest.raises(ConfigError, match="timeout"):
        CodeExecution(timeout=0)
    with pytest.raises(ConfigError, match="code_extractor"):
        CodeExecution(code_extractor="os.path:basename", code_extraction="markdown_code_blocks")
    r = CodeExecution().evaluate(outputs="print(1)", tests={"not": "a test"})
    assert r.error is not None and "tests" in r.error


def test_nothing_runs_unless_the_evaluator_is_configured(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    code = f"open({str(marker)!r}, 'w').write('ran')"
    records = tmp_path / "in.jsonl"
    records.write_text(json.dumps({"inputs": "write code", "outputs": code, "reference_outputs": code}) + "\n")
    out = tmp_path / "out.jsonl"
    res = CliRunner().invoke(app, ["score", str(records), "-e", "exact_match", "-e", "pyright", "-o", str(out), "-q"])
    assert not marker.exists()
    del res  # pyright may be missing here; whatever the outcome, nothing was executed
    out2 = tmp_path / "o2.jsonl"
    res = CliRunner().invoke(app, ["score", str(records), "-e", "code_execution", "-o", str(out2), "-q"])
    assert res.exit_code == 0, res.output
    assert not marker.exists()  # configured: it ran, and the host's directory does not exist for it
    row = json.loads(out2.read_text().splitlines()[0])
    assert row["results"]["execution_succeeded"]["score"] == 0.0
    assert "FileNotFoundError" in row["results"]["execution_succeeded"]["comment"]


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_the_sandbox_dies_with_assay_even_by_kill_9(tmp_path: Path) -> None:
    """A process running code that sleeps is SIGKILLed: nothing of its sandbox outlives it."""
    token = "ASSAY_SANDBOX_ORPHAN=1"
    script = tmp_path / "runner.py"
    script.write_text(
        "import anyio, sys\n"
        "from assay.evaluators.sandbox import Limits, run_python\n"
        "async def main():\n"
        "    print('started', flush=True)\n"
        "    code = 'import time\\ntime.sleep(120)'\n"
        "    await run_python(code, limits=Limits(timeout=120), env={'ASSAY_SANDBOX_ORPHAN': '1'})\n"
        "anyio.run(main)\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _processes_with(token):
        time.sleep(0.1)
    assert _processes_with(token), "the sandboxed code never started"
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _processes_with(token):
        time.sleep(0.1)
    assert _processes_with(token) == []
