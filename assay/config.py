"""The run file: frozen pydantic models, ``${ENV}`` interpolation, ``{{ ds }}`` templating and
``--set a.b=c`` overrides. Every error names the file, the key and the reason.

A minimal run file::

    source: {path: traces/{{ ds }}/*.jsonl.gz}
    evaluators:
      - name: trajectory_match
        params: {mode: unordered, tool_args_match_mode: subset}
    sink: {path: results/{{ ds }}/}

Relative paths are resolved against the run file's directory.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from assay.connectors.kafka import KafkaSinkConfig, KafkaSourceConfig
from assay.exceptions import ConfigError
from assay.traces.normalize import NormalizeOptions


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _connector_type(v: Any) -> Any:
    """``type`` defaults to ``file``, or ``s3`` for ``s3://`` paths."""
    if isinstance(v, dict) and "type" not in v:
        path = v.get("path")
        first = path[0] if isinstance(path, list) and path else path
        v = {**v, "type": "s3" if isinstance(first, str) and first.startswith("s3://") else "file"}
    return v


class SourceConfig(_Model):
    """Where traces come from: local files (``type: file``) or S3 (``type: s3``, selected by
    ``s3://`` paths)."""

    type: Literal["file", "s3"] = "file"
    """Connector type (default from the path)."""
    path: str | list[str]
    """File(s), directories, globs, ``-`` for stdin, or ``s3://bucket/prefix/`` (an object, a
    prefix or a glob). Compression (gzip, zstd) is detected."""
    input_format: Literal["auto", "jsonl", "json"] = "auto"
    """``auto``: JSON array for ``.json`` files that start with ``[``, JSON lines otherwise."""
    read_mode: Literal["records", "sessions"] = "records"
    """``records``: one trace per line/element. ``sessions``: agent session transcripts (Claude Code,
    Agent SDK streams) where one trace spans many lines, grouped by session id, and span-per-record
    OTel exports (``ConsoleSpanExporter``), grouped by trace id (docs/formats.md, otel)."""

    @property
    def paths(self) -> list[str]:
        return [self.path] if isinstance(self.path, str) else list(self.path)


#: How records map onto canonical traces: the model lives with the normalizers that read it.
NormalizeConfig = NormalizeOptions


class EvaluatorSpec(_Model):
    """One evaluator: a registered name and its params (validated by the evaluator's params model)."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class SinkConfig(_Model):
    """Where result rows go: local files (``type: file``) or S3 (``s3://`` paths)."""

    type: Literal["file", "s3"] = "file"
    path: str
    """A file (``out.jsonl[.gz|.zst]``) or a directory (``out/``: parts, ``_SUMMARY.json``, ``_SUCCESS``)."""
    compression: Literal["auto", "none", "gzip", "zstd"] = "auto"
    """``auto`` follows the file suffix (directories: none)."""
    max_rows_per_part: int | None = Field(default=None, gt=0)
    """Directory output: start a new part file after this many rows."""


class DeadLetterConfig(_Model):
    """Where records that could not be parsed, normalized or evaluated go."""

    type: Literal["file", "s3"] = "file"
    path: str
    """A JSONL file or a directory."""


class LimitsConfig(_Model):
    """Engine limits."""

    batch_size: int = Field(default=256, gt=0)
    """Records per micro-batch."""
    buffer: int = Field(default=4, gt=0)
    """Batches buffered between stages (the backpressure)."""
    workers: int | None = Field(default=None, gt=0)
    """Concurrent evaluate workers in one process (default 1; 8 with async evaluators)."""
    max_dead_letters: int | None = Field(default=None, ge=0)
    """Exit 4 when more records than this went to the dead-letter output."""
    max_dead_letter_ratio: float | None = Field(default=None, ge=0, le=1)
    """Exit 4 when more than this fraction of records went to the dead-letter output."""
    budget_usd: float | None = Field(default=None, gt=0)
    """Stop cleanly (exit 5, resumable) when judge spending reaches this."""
    grace_period_s: float = Field(default=30.0, ge=0)
    """On SIGTERM/SIGINT: time allowed for in-flight work before it is abandoned."""
    commit_interval_s: float = Field(default=5.0, gt=0)
    """How often written rows are made durable, acknowledged and checkpointed (a kill -9 redoes
    at most this much work; the output never repeats a row)."""
    max_error_rate: float | None = Field(default=0.5, ge=0, le=1)
    """Fail the run (exit 1, no ``_SUCCESS``) when more than this fraction of an evaluator's
    results are errors (a judge that is down, a broken evaluator). None: never."""


class GateConfig(_Model):
    """A quality gate on one result key: the run exits 3 when it fails."""

    min_mean: float | None = None
    """Fail when the key's mean score is below this."""
    max_mean: float | None = None
    """Fail when the key's mean score is above this (e.g. an escalation rate)."""
    min_pass_rate: float | None = None
    """Fail when the share of passing results is below this."""
    max_pass_rate: float | None = None
    """Fail when the share of passing results is above this ("escalation rate above 15 %")."""


class RunConfig(_Model):
    """A whole run file."""

    run_id: str | None = None
    """Run id written in every row (default: random)."""
    source: Annotated[SourceConfig | KafkaSourceConfig, Field(discriminator="type")]
    """Where traces come from: files and ``s3://`` paths (``path``), or ``type: kafka``."""
    normalize: NormalizeConfig = NormalizeConfig()
    evaluators: list[EvaluatorSpec] = Field(min_length=1)
    judges: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Named judge endpoints (provider, base_url, model, api_key_env, rpm, …) used by judge evaluators."""
    sink: Annotated[SinkConfig | KafkaSinkConfig, Field(discriminator="type")]
    """Where result rows go: a file, a directory, an ``s3://`` prefix, or ``type: kafka``."""
    dead_letter: Annotated[DeadLetterConfig | KafkaSinkConfig, Field(discriminator="type")] | None = None
    """Default: ``dead_letter.jsonl`` inside a directory sink, ``<name>.dead_letter.jsonl`` next to a file sink."""
    limits: LimitsConfig = LimitsConfig()
    gates: dict[str, GateConfig] = Field(default_factory=dict)
    state_dir: str = ".assay"
    """Checkpoints and judge cache (relative to the run file)."""
    summary_path: str | None = None
    """Where ``_SUMMARY.json`` goes when the sink has no directory of its own (Kafka); default
    ``<state_dir>/summaries/<sink>/_SUMMARY.json``."""
    s3: dict[str, Any] | None = None
    """S3 connection settings for every ``s3://`` path: ``endpoint_url``, ``region``, ``profile``
    (default: the standard AWS chain, including ``AWS_ENDPOINT_URL``)."""
    rate_store: str | None = None
    """``redis://host:port/db``: every judge that sets no ``shared_limit`` of its own shares its
    rpm/tpm budget through this Redis (across ``--workers`` and ``--shard`` processes)."""

    @field_validator("source", "sink", "dead_letter", mode="before")
    @classmethod
    def _default_type(cls, v: Any) -> Any:
        return _connector_type(v)

    @field_validator("evaluators", mode="before")
    @classmethod
    def _shorthand(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [parse_evaluator_spec(x) if isinstance(x, str) else x for x in v]
        return v

    @model_validator(mode="after")
    def _unique_names(self) -> RunConfig:
        return self

    @field_validator("rate_store")
    @classmethod
    def _rate_store_url(cls, v: str | None) -> str | None:
        from assay.judges.config import redis_url  # lazy: pydantic only, no aiohttp

        return redis_url(v)

    @model_validator(mode="before")
    @classmethod
    def _rate_store(cls, data: Any) -> Any:
        """``rate_store``: the run's Redis becomes the ``shared_limit`` of every judge, declared or
        inline, that names none of its own."""
        from assay.judges.config import REDIS_SCHEMES  # lazy: pydantic only, no aiohttp

        store = data.get("rate_store") if isinstance(data, dict) else None
        if not isinstance(store, str) or not store.startswith(REDIS_SCHEMES):
            return data  # nothing to share, or a wrong URL that the field's own check reports

        def shared(raw: Any) -> Any:
            return {**raw, "shared_limit": store} if isinstance(raw, dict) and "shared_limit" not in raw else raw

        out = dict(data)
        if isinstance(data.get("judges"), dict):
            out["judges"] = {name: shared(raw) for name, raw in data["judges"].items()}
        if isinstance(data.get("evaluators"), list):
            out["evaluators"] = [
                {**ev, "params": {**ev["params"], "judge": shared(ev["params"].get("judge"))}}
                if isinstance(ev, dict)
                and isinstance(ev.get("params"), dict)
                and isinstance(ev["params"].get("judge"), dict)
                else ev
                for ev in data["evaluators"]
            ]
        return out

    @model_validator(mode="after")
    def _judges_known(self) -> RunConfig:
        """A judge named by an evaluator must be declared; an inline judge config must be valid."""
        from assay.judges.config import parse_judge_config  # lazy: pydantic only, no aiohttp

        for name, raw in self.judges.items():
            parse_judge_config(name, raw)
        for i, spec in enumerate(self.evaluators):
            judge = spec.params.get("judge")
            if isinstance(judge, str) and judge not in self.judges:
                known = ", ".join(sorted(self.judges)) or "none are declared under judges:"
                raise ValueError(f"evaluators[{i}] ({spec.name}): unknown judge {judge!r} (judges: {known})")
            if isinstance(judge, dict):
                parse_judge_config(f"(evaluators[{i}].params.judge)", judge)
        return self


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_TEMPLATE = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")


def parse_scalar(text: str) -> Any:
    """A CLI value parsed as YAML (``5`` → 5, ``true`` → True, ``[a, b]`` → list), else the text."""
    try:
        return yaml.safe_load(text) if text.strip() else text
    except yaml.YAMLError:
        return text


def _split_top(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside brackets/braces/quotes."""
    parts, depth, cur, quote = [], 0, [], ""
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def parse_evaluator_spec(spec: str) -> dict[str, Any]:
    """``"trajectory_match:mode=strict,tool_args_match_mode=ignore"`` → ``{name, params}``."""
    name, _, rest = spec.partition(":")
    params: dict[str, Any] = {}
    if rest.strip():
        for item in _split_top(rest, ","):
            if not item.strip():
                continue
            key, eq, value = item.partition("=")
            if not eq:
                raise ConfigError(f"evaluator spec {spec!r}: expected key=value, got {item!r}")
            params[key.strip()] = parse_scalar(value.strip())
    return {"name": name.strip(), "params": params}


def _set_path(data: dict[str, Any], dotted: str, value: Any, origin: str) -> None:
    steps = dotted.split(".")
    cur: Any = data
    for i, step in enumerate(steps):
        last = i == len(steps) - 1
        if isinstance(cur, list):
            if not step.isdigit() or int(step) >= len(cur):
                raise ConfigError(f"{origin}: --set {dotted}: {step!r} is not an index of the list")
            if last:
                cur[int(step)] = value
            else:
                cur = cur[int(step)]
        elif isinstance(cur, dict):
            if last:
                cur[step] = value
            else:
                cur = cur.setdefault(step, {})
        else:
            raise ConfigError(f"{origin}: --set {dotted}: {'.'.join(steps[:i])} is not a mapping")


def _interpolate(
    value: Any, where: str, origin: str, variables: dict[str, str], expanded: set[str] | None = None
) -> Any:
    if isinstance(value, str):

        def env(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in os.environ:
                if expanded is not None and len(os.environ[name]) >= 6:
                    expanded.add(os.environ[name])
                return os.environ[name]
            if default is not None:
                return default
            raise ConfigError(f"{origin}: {where}: environment variable {name} is not set")

        def tpl(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in variables:
                hint = " (pass --ds YYYY-MM-DD)" if name == "ds" else ""
                raise ConfigError(f"{origin}: {where}: template variable {{{{ {name} }}}} has no value{hint}")
            return variables[name]

        return _TEMPLATE.sub(tpl, _ENV.sub(env, value))
    if isinstance(value, dict):
        return {
            k: _interpolate(v, f"{where}.{k}" if where else str(k), origin, variables, expanded)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_interpolate(v, f"{where}[{i}]", origin, variables, expanded) for i, v in enumerate(value)]
    return value


def redact_values(text: str, secrets: set[str]) -> str:
    """``text`` with every value in ``secrets`` (the ``${ENV}`` values a run file expanded) blanked."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def template_variables(ds: str | None) -> dict[str, str]:
    if ds is None:
        return {}
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", ds):
        raise ConfigError(f"--ds: expected YYYY-MM-DD, got {ds!r}")
    return {"ds": ds, "ds_nodash": ds.replace("-", ""), "yyyy": ds[:4], "mm": ds[5:7], "dd": ds[8:10]}


def format_errors(origin: str, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        msg = err["msg"].removeprefix("Value error, ")
        if not err["loc"]:  # a check of the whole file: its message names the keys, the input is the file
            lines.append(f"{origin}: {msg}")
            continue
        loc = ".".join(str(p) for p in err["loc"])
        shown = "" if err["type"] == "missing" else f" (got {err.get('input')!r})"
        lines.append(f"{origin}: {loc}: {msg}{shown}")
    return "\n".join(lines)


def _resolve_relative(data: dict[str, Any], base: Path) -> None:
    def fix(p: str) -> str:
        if p == "-" or "://" in p or os.path.isabs(p):
            return p
        return str(base / p) + ("/" if p.endswith("/") else "")

    src = data.get("source")
    if isinstance(src, dict) and "path" in src:
        src["path"] = [fix(p) for p in src["path"]] if isinstance(src["path"], list) else fix(src["path"])
    for section in ("sink", "dead_letter"):
        sec = data.get(section)
        if isinstance(sec, dict) and isinstance(sec.get("path"), str):
            sec["path"] = fix(sec["path"])
    if isinstance(data.get("state_dir"), str):
        data["state_dir"] = fix(data["state_dir"])
    elif "state_dir" not in data:
        data["state_dir"] = fix(".assay")


def build_config(
    data: Any,
    *,
    origin: str = "<config>",
    ds: str | None = None,
    sets: list[str] | None = None,
    base_dir: Path | None = None,
) -> RunConfig:
    """Validate a parsed run file (after overrides, interpolation and templating)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: the run file must be a mapping, got {type(data).__name__}")
    data = copy.deepcopy(data)
    if isinstance(data.get("evaluators"), list):
        data["evaluators"] = [parse_evaluator_spec(x) if isinstance(x, str) else x for x in data["evaluators"]]
    for item in sets or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ConfigError(f"--set {item!r}: expected key=value")
        _set_path(data, key.strip(), parse_scalar(value), origin)
    expanded: set[str] = set()
    data = _interpolate(data, "", origin, template_variables(ds), expanded)
    if base_dir is not None:
        _resolve_relative(data, base_dir)
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        # `from None`: pydantic's own text echoes the input, which may hold an expanded secret
        raise ConfigError(redact_values(format_errors(origin, exc), expanded)) from None
    except ConfigError as exc:
        raise ConfigError(redact_values(f"{origin}: {exc}", expanded)) from None


def load_run_file(path: str | Path, *, ds: str | None = None, sets: list[str] | None = None) -> RunConfig:
    """Read, interpolate and validate a run file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read run file: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}{where}: invalid YAML: {problem}") from exc
    return build_config(data, origin=str(path), ds=ds, sets=sets, base_dir=p.resolve().parent)
