"""code_execution: generated code runs in a limited child interpreter (real subprocesses)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.evaluators import CodeExecution
from assay.evaluators.sandbox import Limits, namespace_prefix, run_python
from assay.exceptions import ConfigError
from assay.registry import build_evaluator

NETWORK_MODES = [
    "hook",
    pytest.param(
        "namespace", marks=pytest.mark.skipif(namespace_prefix() is None, reason="no network namespace on this machine")
    ),
]


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


@pytest.mark.parametrize("network", NETWORK_MODES)
def test_network_attempt_fails(listener: int, network: str) -> None:
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {listener}), timeout=2).sendall(b'x')\n"
    r = CodeExecution(network=network).evaluate(outputs=code)
    assert r.score == 0.0
    assert r.metadata["network"] == network


def test_namespace_alone_cuts_the_network(listener: int) -> None:
    """The kernel guarantee, without the audit hook: a raw connect through libc fails."""
    if namespace_prefix() is None:
        pytest.skip("no network namespace on this machine")
    code = f"""
import ctypes, ctypes.util, struct
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
fd = libc.socket(2, 1, 0)
addr = struct.pack("!HH4s8x", 2, {listener}, bytes([127, 0, 0, 1]))
addr = struct.pack("=H", 2) + addr[2:]
rc = libc.connect(fd, addr, len(addr))
assert rc != 0, "connected"
"""
    r = CodeExecution(network="namespace").evaluate(outputs=code)
    assert r.score == 1.0, r.comment


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
    assert CodeExecution().evaluate(outputs="open('inside.txt', 'w').write('ok')").score == 1.0
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
    assert not marker.exists()  # configured: it ran, and its write outside its directory was refused
    row = json.loads(out2.read_text().splitlines()[0])
    assert row["results"]["execution_succeeded"]["score"] == 0.0
    assert "writing outside the sandbox directory is disabled" in row["results"]["execution_succeeded"]["comment"]
