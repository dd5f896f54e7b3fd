"""What ``assay validate`` checks beyond the run file's schema: what the run will need from this
machine — the API keys of the judges it calls, and the optional dependencies (extras) of its
connectors — so a run that would fail at its first S3 request or judge call fails here instead.

>>> from assay.config import build_config
>>> run = {"source": {"path": "t.jsonl"}, "evaluators": ["exact_match"], "sink": {"path": "o/"}}
>>> environment_problems(build_config(run), [])
[]
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from typing import Any

from assay.config import RunConfig

#: Modules a connector type needs, and the extra that installs them.
CONNECTOR_NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "s3": (("aiobotocore",), "assay[s3]"),
    "kafka": (("aiokafka",), "assay[kafka]"),
    "delta": (("deltalake", "pyarrow"), "assay[lake]"),
}


def _missing(modules: tuple[str, ...]) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def connector_problems(config: RunConfig) -> list[str]:
    """The sections whose connector (or format) needs a module that is not installed."""
    problems = []
    sections: list[tuple[str, Any]] = [("source", config.source), ("sink", config.sink)]
    if config.dead_letter is not None:
        sections.append(("dead_letter", config.dead_letter))
    for name, section in sections:
        kind = str(getattr(section, "type", ""))
        modules, extra = CONNECTOR_NEEDS.get(kind, ((), ""))
        if _missing(modules):
            problems.append(f"{name}: type {kind} needs {', '.join(_missing(modules))}: pip install '{extra}'")
        parquet = getattr(section, "format", None) == "parquet" or getattr(section, "input_format", None) == "parquet"
        path = getattr(section, "path", None)
        paths = path if isinstance(path, list) else [path]
        parquet = parquet or any(isinstance(p, str) and p.endswith(".parquet") for p in paths)
        if parquet and _missing(("pyarrow",)):
            problems.append(f"{name}: Parquet needs pyarrow: pip install 'assay[lake]'")
    return problems


def judge_configs(config: RunConfig, evaluators: list[Any]) -> dict[str, Any]:
    """Every judge the run may call, by where it is configured: the declared ones
    (``judges.NAME``) and the inline ones of the evaluators (``params.judge`` as a config,
    ``params.model`` shorthands, panels)."""
    from assay.evaluators.judge_base import JudgeEvaluator, shorthand_judge
    from assay.judges.config import parse_judge_config

    found: dict[str, Any] = {f"judges.{name}": parse_judge_config(name, raw) for name, raw in config.judges.items()}
    for i, ev in enumerate(evaluators):
        if not isinstance(ev, JudgeEvaluator):
            continue
        for j, spec in enumerate(ev.panel):
            raw = spec if isinstance(spec, dict) else None
            if spec is None and ev.params.model is not None:
                raw = shorthand_judge(ev.params.model)
            if raw is not None:
                where = f"evaluators[{i}] ({ev.name}) judge" + (f" {j}" if len(ev.panel) > 1 else "")
                found[where] = parse_judge_config("(inline)", raw)
    return found


def key_problems(judges: Mapping[str, Any]) -> list[str]:
    """Judges whose API key is not in the environment: one named by ``api_key_env``, or the
    provider's default variable when the judge calls the provider's own API (no ``base_url``; a
    proxy or a local server may need no key)."""
    problems = []
    for name, cfg in judges.items():
        env = cfg.resolved_key_env()
        if not env or os.environ.get(env):
            continue
        if cfg.api_key_env is not None:
            problems.append(f"{name}: api_key_env: environment variable {env} is not set (or empty)")
        elif cfg.base_url is None:
            problems.append(
                f"{name}: environment variable {env} is not set (or empty): the {cfg.provider} API needs "
                "a key (set it, or name another variable in api_key_env)"
            )
    return problems


def environment_problems(config: RunConfig, evaluators: list[Any]) -> list[str]:
    """Everything this machine lacks for the run (empty: nothing)."""
    return [*connector_problems(config), *key_problems(judge_configs(config, evaluators))]


__all__ = ["CONNECTOR_NEEDS", "connector_problems", "environment_problems", "judge_configs", "key_problems"]
