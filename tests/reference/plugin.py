"""The pytest plugin an upstream suite runs under (``-p tests.reference.plugin``, started by
:func:`tests.reference.upstream.run`; ``ASSAY_REFERENCE_PLAN`` names its plan).

- **Both verdict modes in one process.** Every test is parametrized by ``assay_verdict`` (``yes``,
  ``no``); for the time of each test (setup, call, teardown) OpenAI and Anthropic clients point at a
  stand-in judge server giving that verdict (:mod:`tests.reference.verdicts`); no LangSmith (its
  endpoint answers 404), no E2B. A suite whose plan has the mode ``-`` runs once, without a model.
- **Selection.** A test runs in a mode only if the plan selects it there (the manifest: it passes on
  the reference in that mode); the rest are deselected.
- **Async tests** carry pytest-asyncio's ``@pytest.mark.asyncio`` and run under ``asyncio.run``
  (pytest-asyncio is not a dependency).
- **Results.** Every collected test (named as in the manifest: ``file.py::test``, a parameter set by
  its position) and each run test's outcome per mode are written to the plan's ``results`` file.
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

from tests.reference.upstream import position_keys

PLAN: dict[str, Any] = json.loads(Path(os.environ["ASSAY_REFERENCE_PLAN"]).read_text(encoding="utf-8"))
MODES: list[str] = PLAN["modes"]
MODE = pytest.StashKey[str]()
KEY = pytest.StashKey[str]()
_servers: dict[str, Any] = {}
_collected: list[str] = []
_outcomes: dict[str, dict[str, str]] = {m: {} for m in MODES}
_errors: list[str] = []

#: The keys removed while a test runs: no LangSmith, no E2B, no real providers.
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

        server = JudgeServerThread(rule=verdicts.RULES[mode])
        server.__enter__()
        _servers[mode] = server
    return _servers[mode]


@pytest.fixture(autouse=True)
def assay_verdict() -> str:
    """The verdict mode of the running test (parametrized by :func:`pytest_generate_tests`)."""
    return "-"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if MODES != ["-"]:
        metafunc.parametrize("assay_verdict", MODES, ids=MODES)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "langsmith: upstream marker (LangSmith's pytest plugin is off)")
    config.addinivalue_line("markers", "asyncio: upstream marker (pytest-asyncio's): run under asyncio.run")


def pytest_unconfigure(config: pytest.Config) -> None:
    for server in _servers.values():
        server.__exit__(None, None, None)
    _servers.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """Import the upstream modules in the environment their tests run in (and without failing on a
    third-party deprecation warning raised while importing them)."""
    with patched_env(reference_env("http://127.0.0.1:9")), warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=r"langsmith\.wrappers\.")
        yield


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _errors.append(f"{report.nodeid}: {str(report.longrepr)[-2000:]}")


def _mode(item: pytest.Item) -> str:
    callspec = getattr(item, "callspec", None)
    return str(callspec.params["assay_verdict"]) if callspec and "assay_verdict" in callspec.params else "-"


def _base(item: pytest.Item) -> str:
    """``file.py::test`` (``file.py::test[]`` when upstream parametrizes it) relative to the suite."""
    path, _, name = item.nodeid.partition("::")
    callspec = getattr(item, "callspec", None)
    upstream = callspec is not None and any(k != "assay_verdict" for k in callspec.params)
    return f"{Path(path).name}::{name.partition('[')[0]}" + ("[]" if upstream else "")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    select = {mode: set(ids) for mode, ids in PLAN["select"].items()}
    for mode in MODES:
        group = [item for item in items if _mode(item) == mode]
        for item, key in zip(group, position_keys([_base(i) for i in group]), strict=True):
            item.stash[KEY] = key.replace("[]", "")
            item.stash[MODE] = mode
            if mode == MODES[0]:
                _collected.append(item.stash[KEY])
    if PLAN.get("all"):  # every test in every mode (to see what the manifest would say)
        return
    kept = [i for i in items if i.stash.get(KEY, None) in select.get(i.stash.get(MODE, "?"), set())]
    dropped = [i for i in items if i not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    mode = item.stash[MODE]
    with contextlib.ExitStack() as stack:
        if mode != "-":
            stack.enter_context(patched_env(reference_env(_server(mode).url)))
        yield
    outcomes = _outcomes[mode]
    outcomes.setdefault(item.stash[KEY], "passed")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    item_key, mode = _by_nodeid.get(report.nodeid, (None, None))
    if item_key is None or mode is None:
        return
    current = _outcomes[mode].get(item_key)
    if report.failed:
        _outcomes[mode][item_key] = "failed"
    elif report.skipped and current != "failed":
        _outcomes[mode][item_key] = "skipped"


_by_nodeid: dict[str, tuple[str, str]] = {}


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    for item in session.items:
        _by_nodeid[item.nodeid] = (item.stash[KEY], item.stash[MODE])


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**args))
    return True


def pytest_sessionfinish(session: pytest.Session) -> None:
    results = {"collected": _collected, "outcomes": _outcomes, "collect_errors": _errors}
    Path(PLAN["results"]).write_text(json.dumps(results, indent=1, sort_keys=True), encoding="utf-8")
