"""openevals' and agentevals' own test suites, vendored with only their imports rewritten to
``assay.compat``, run against the stand-in model (see README.md).

Each vendored test runs in the verdict mode it passes in on the reference (``manifest.json``:
``run``); the tests that pass in neither mode on the reference are deselected and listed with the
reason in README.md (``excluded``), except those that pass on assay all the same (``beyond``: the
reference's closed-event-loop bug, a download assay does not need), which run in that mode.
``ASSAY_REFERENCE_VERDICT=yes|no`` runs every vendored test in
that mode instead (to see what the manifest would say). For the time of each test (setup, call,
teardown) the environment points OpenAI and Anthropic clients at the stand-in; no LangSmith, no
E2B. An ``async def`` test marked ``asyncio`` (pytest-asyncio's marker) runs under ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
MANIFEST: dict[str, Any] = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))
FORCED = os.environ.get("ASSAY_REFERENCE_VERDICT")
MODE = pytest.StashKey[str]()
#: Tests that pass but leave CPython 3.11.7's AST validator with a wrong recursion depth
#: ("SystemError: AST constructor recursion depth mismatch" at the next import pytest rewrites):
#: run by test_vendored.py in a process of their own (ASSAY_REFERENCE_ISOLATED=1), not in the suite's.
ISOLATED = frozenset(
    {
        "openevals_suite/simulators/test_multiturn.py::test_multiturn_message_with_openai",
        "openevals_suite/simulators/test_multiturn.py::test_multiturn_message_with_openai_async",
    }
)
IN_ISOLATION = os.environ.get("ASSAY_REFERENCE_ISOLATED") == "1"
_servers: dict[str, Any] = {}

#: What every vendored test sees (and the keys removed: no LangSmith, no E2B, no real providers).
CLEARED = ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "E2B_API_KEY", "OPENAI_ORGANIZATION", "OPENAI_PROJECT")


def reference_env(url: str) -> dict[str, str]:
    no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1", "localhost"]))
    return {
        "OPENAI_API_KEY": "sk-stand-in",
        "OPENAI_BASE_URL": url + "/v1",
        "ANTHROPIC_API_KEY": "sk-ant-stand-in",
        "ANTHROPIC_BASE_URL": url,
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
        "LANGSMITH_TEST_TRACKING": "false",
        "LANGSMITH_ENDPOINT": url + "/langsmith",  # the stand-in answers 404: LangSmith calls fail at once
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
    }


@contextlib.contextmanager
def patched_env(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in (*values, *CLEARED)}
    os.environ.update(values)
    for k in CLEARED:
        os.environ.pop(k, None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _server(mode: str) -> Any:
    if mode not in _servers:
        from assay.testing.judge_server import JudgeServerThread
        from tests.reference import verdicts

        server = JudgeServerThread(rule=verdicts.yes if mode == "yes" else verdicts.no)
        server.__enter__()
        _servers[mode] = server
    return _servers[mode]


def _key(item: pytest.Item) -> str | None:
    """The test's id relative to this directory (None for a test elsewhere)."""
    try:
        rel = Path(str(item.path)).resolve().relative_to(HERE)
    except ValueError:
        return None
    return f"{rel.as_posix()}::{item.nodeid.partition('::')[2]}"


def manifest_keys(items: list[pytest.Item]) -> list[str | None]:
    """Each item's manifest key: its id here, a parameter set named by its position
    (:func:`tests.reference.vendor.position_keys`)."""
    from tests.reference.vendor import position_keys

    keys = [_key(item) for item in items]
    ours = [k for k in keys if k is not None]
    positional = iter(position_keys(ours))
    return [None if k is None else next(positional) for k in keys]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "langsmith: upstream marker (LangSmith's pytest plugin is off)")
    config.addinivalue_line("markers", "asyncio: upstream marker (pytest-asyncio's): run under asyncio.run")


def pytest_unconfigure(config: pytest.Config) -> None:
    for server in _servers.values():
        server.__exit__(None, None, None)
    _servers.clear()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A vendored module excluded as a whole (it fails to import on the reference: E2B) is not imported."""
    try:
        rel = collection_path.resolve().relative_to(HERE).as_posix()
    except ValueError:
        return None
    return True if rel in MANIFEST["excluded"] and not FORCED else None


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """Import the vendored modules with the same environment as their tests run in (and without
    failing on a third-party deprecation warning raised while importing them)."""
    with patched_env(reference_env("http://127.0.0.1:9")), warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=r"langsmith\.wrappers\.")
        yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run: dict[str, str] = {**MANIFEST["run"], **MANIFEST["beyond"]}
    kept, dropped = [], []
    for item, key in zip(items, manifest_keys(items), strict=True):
        if key is None or not key.startswith(("openevals_suite/", "agentevals_suite/")):
            kept.append(item)
            continue
        mode = FORCED or run.get(key)
        if mode is None or (not FORCED and (key in ISOLATED) != IN_ISOLATION):
            dropped.append(item)
            continue
        item.stash[MODE] = mode
        if key.startswith(("openevals_suite/code/test_code_typecheck", "openevals_suite/test_embedding_similarity")):
            item.add_marker(pytest.mark.slow)  # pyright / mypy over FastAPI code (5-40 s each), torch
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    mode = item.stash.get(MODE, None)
    if mode is None:
        yield
        return
    with patched_env(reference_env(_server(mode).url)):
        yield


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if MODE not in pyfuncitem.stash or not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**args))
    return True
