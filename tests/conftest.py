"""Shared fixtures."""

from __future__ import annotations

import compileall
import importlib.util
import json
import os
import resource
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = [
    "tests.support.s3_fixtures",
    "tests.support.kafka_fixtures",
    "tests.support.redis_fixtures",
    "tests.support.phoenix_fixtures",
    "tests.support.ray_fixtures",
]


ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """Two costs of every test run that are not tests (measured in benchmarks/README.md, "The test
    suite's wall time"):

    * pytest rewrites the asserts of every module of a distribution that registers a pytest plugin
      (assay's own, hypothesis, anyio, langsmith: ~600 modules), in every xdist worker, and with
      ``PYTHONDONTWRITEBYTECODE`` set (as in CI) caches none of it. Only test code needs rewritten
      asserts, so only ``tests`` stays marked (pytest's hook keeps the marks in a set it exposes
      to no API; if a later pytest renames it, this does nothing).
    * the ``assay`` subprocesses the tests start compile the package from source when no bytecode
      was written: the controller compiles it once before the workers start (``compileall``
      writes whatever ``PYTHONDONTWRITEBYTECODE`` says, and skips what is current)."""
    marked = getattr(getattr(config.pluginmanager, "rewrite_hook", None), "_must_rewrite", None)
    if isinstance(marked, set):
        marked.intersection_update({name for name in marked if name.split(".")[0] == "tests"})
    if not hasattr(config, "workerinput"):
        for tree in (ROOT / "assay", ROOT / "tests" / "support"):
            compileall.compile_dir(tree, quiet=1, workers=2)
        if config.getoption("numprocesses", None):
            _rewrite_tests_ahead(config)


def _rewrite_tests_ahead(config: pytest.Config) -> None:
    """Under xdist, the controller rewrites the test modules' asserts once and caches them where
    pytest looks (``__pycache__/*-pytest-*.pyc``, read even where ``PYTHONDONTWRITEBYTECODE``
    stops pytest from writing them): otherwise every worker rewrites all of them (~6 s of CPU
    each). Uses pytest's rewrite functions, which it exposes to no API: if a later pytest renames
    them, this does nothing and the workers rewrite as before."""
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        tail, read, write = rewrite.PYC_TAIL, rewrite._read_pyc, rewrite._write_pyc
        rewrite_test, cache_dir_of = rewrite._rewrite_test, rewrite.get_cache_dir
    except (ImportError, AttributeError, KeyError):
        return
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if not (path.name.startswith("test_") or path.name == "conftest.py" or path.parent.name == "support"):
            continue
        cache = cache_dir_of(path)
        pyc = cache / (path.name[:-3] + tail)
        if read(path, pyc) is not None:
            continue
        if not rewrite.try_makedirs(cache):
            return
        source_stat, code = rewrite_test(path, config)
        write(state, code, source_stat, pyc)


def _cpu_seconds() -> float:
    """CPU time of this process and of the children it has waited for (the subprocesses a test runs)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """``ASSAY_TEST_CPU=FILE``: append each test's CPU seconds (setup, call and teardown, with the
    subprocesses it waited for) to FILE — what the suite's wall time on two cores is made of
    (benchmarks/README.md, "The test suite's wall time")."""
    log = os.environ.get("ASSAY_TEST_CPU")
    before = _cpu_seconds()
    yield
    if log:
        with open(log, "a") as fh:
            fh.write(f"{_cpu_seconds() - before:.2f} {item.nodeid}\n")


def load_module(path: Path, name: str) -> Any:
    """A module from a file outside the package (benchmarks/, conformance helpers), loaded once."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def tool_call(i: int, name: str, args: Any) -> dict[str, Any]:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}


def agent_messages(*calls: tuple[str, dict[str, Any]], final: str = "done") -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "do it"}]
    for i, (name, args) in enumerate(calls):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [tool_call(i, name, args)]})
        msgs.append({"role": "tool", "tool_call_id": f"call_{i}", "content": "{}"})
    msgs.append({"role": "assistant", "content": final})
    return msgs


@pytest.fixture
def write_jsonl(tmp_path: Path) -> Callable[..., Path]:
    def write(name: str, rows: list[Any], raw_lines: dict[int, str] | None = None) -> Path:
        lines = [json.dumps(r) for r in rows]
        for index, text in sorted((raw_lines or {}).items()):
            lines.insert(index, text)
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n")
        return path

    return write


@pytest.fixture(autouse=True)
def _assay_logger_restored() -> Any:
    """A CLI run in this process (``CliRunner``) sets up the ``assay`` logger (its own handler, no
    propagation, a level): restore it after each test so later tests' ``caplog`` sees records."""
    import logging

    from assay.observability.logs import ROOT_LOGGER

    logger = logging.getLogger(ROOT_LOGGER)
    saved = (list(logger.handlers), logger.propagate, logger.level)
    yield
    logger.handlers[:], logger.propagate = saved[0], saved[1]
    logger.setLevel(saved[2])
