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
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from assay.connector_table import ConnectorConfig, parse_section
from assay.exceptions import ConfigError
from assay.paths import check_day, check_ds, day_problem
from assay.potato_config import ai_support_judge
from assay.sampling import SampleSpec
from assay.traces.normalize import NormalizeOptions
from assay.urls import REDIS_SCHEMES, redis_url

#: The source types that read a platform's API over a day (:mod:`assay.connectors.api_source`).
API_SOURCES = frozenset({"langsmith", "langfuse", "phoenix"})


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: How records map onto canonical traces: the model lives with the normalizers that read it.
NormalizeConfig = NormalizeOptions


class EvaluatorSpec(_Model):
    """One evaluator: a registered name and its params (validated by the evaluator's params model)."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    sample: SampleSpec | None = None
    """Score only a repeatable sample of the traces (see :mod:`assay.sampling`)."""
    version: int | str | None = None
    """Declared by the user (``version: 3``): it enters the evaluator's identity, so raising it
    makes every earlier result of the evaluator stale (``assay run`` and ``assay backfill`` score
    it again; see ``docs/backfill.md``)."""


#: ``limits.max_dead_letter_ratio`` unless the run file sets it.
DEFAULT_MAX_DEAD_LETTER_RATIO = 0.5


class PushSpec(BaseModel):
    """One ``push:`` target: its ``type`` (langsmith, langfuse, phoenix, otel, or an ``assay.push``
    entry point), an optional ``name``, and the target's own keys, which the target's params model
    validates (:func:`assay.push.registry.validate_push_spec`, called when a run file is loaded by
    the CLI: this module does not import the push targets)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    type: str
    name: str | None = None

    @property
    def target_name(self) -> str:
        """The name in ``_SUMMARY.json`` (``push.<name>``), the push ledger and ``--to``."""
        return self.name or self.type

    def params(self) -> dict[str, Any]:
        """The whole entry as the run file gave it (for the target's params model)."""
        return self.model_dump()


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
    max_dead_letter_ratio: float | None = Field(default=DEFAULT_MAX_DEAD_LETTER_RATIO, ge=0, le=1)
    """Exit 4 (no ``_SUCCESS``) when more than this fraction of the records read went to the
    dead-letter output. The default, 0.5, fails a run whose input is not in a format it reads (every
    record a dead letter) and keeps one whose input has a few bad records; ``null``: never."""
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


class GateBound(_Model):
    """A gate bound checked against an end of the confidence interval instead of the point value:
    ``min_pass_rate: {value: 0.9, on: lower_bound}`` fails unless the interval's lower end clears 0.9."""

    value: float
    """The threshold."""
    on: Literal["point", "lower_bound", "upper_bound"] = "point"
    """What is compared with it: the point estimate (default), or the lower or upper end of the
    key's ``mean_ci`` / ``pass_rate_ci`` (level ``stats.ci_level``)."""


class GateConfig(_Model):
    """A quality gate on one result key: the run exits 3 when it fails. Each bound is a number
    (compared with the point value) or a :class:`GateBound` ``{value, on}``."""

    min_mean: float | GateBound | None = None
    """Fail when the key's mean score is below this."""
    max_mean: float | GateBound | None = None
    """Fail when the key's mean score is above this (e.g. an escalation rate)."""
    min_pass_rate: float | GateBound | None = None
    """Fail when the share of passing results is below this."""
    max_pass_rate: float | GateBound | None = None
    """Fail when the share of passing results is above this ("escalation rate above 15 %")."""
    min_kappa: float | GateBound | None = None
    """Fail when Cohen's kappa of the key against the human labels of ``calibration.labels`` is
    below this (a judge that drifted), or when no labelled trace was scored."""


class CalibrationConfig(_Model):
    """Human labels the run's judges are measured against (``min_kappa`` gates)."""

    labels: str
    """A JSONL, CSV or Parquet file of ``trace_id``, ``key``, ``label`` rows (relative to the run file)."""


class StatsConfig(_Model):
    """How the summary's intervals are computed."""

    ci_level: float = Field(default=0.95, gt=0, lt=1)
    """Confidence level of every ``mean_ci`` / ``pass_rate_ci``."""
    cluster_by: str | None = None
    """A trace field whose equal values are one cluster (``metadata.session_id``: the traces of a
    session are not independent): the intervals become cluster-robust."""


class RunConfig(_Model):
    """A whole run file."""

    _expanded: frozenset[str] = PrivateAttr(default_factory=frozenset)

    run_id: str | None = None
    """Run id written in every row (default: stable for the run file and ``--ds``)."""
    ds: str | None = None
    """The run's logical date (``--ds``, ``YYYY-MM-DD``), set by the CLI; Parquet and Delta sinks write it."""
    source: ConnectorConfig
    """Where traces come from: files and ``s3://`` paths (``path``), ``type: kafka``, or any
    connector registered under the ``assay.connectors`` entry-point group (validated by its own
    model)."""
    normalize: NormalizeConfig = NormalizeConfig()
    evaluators: list[EvaluatorSpec] = Field(min_length=1)
    judges: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Named judge endpoints (provider, base_url, model, api_key_env, rpm, …) used by judge evaluators."""
    sink: ConnectorConfig
    """Where result rows go: a file, a directory, an ``s3://`` prefix, ``type: kafka``, or a
    registered connector's sink."""
    dead_letter: ConnectorConfig | None = None
    """Default: the sink's connector says (``_dead_letter/`` inside a directory or S3 sink,
    ``<name>.dead_letter.jsonl`` next to a file sink), else a directory under ``state_dir``."""
    limits: LimitsConfig = LimitsConfig()
    gates: dict[str, GateConfig] = Field(default_factory=dict)
    stats: StatsConfig = StatsConfig()
    """Confidence level and clustering of the summary's intervals."""
    calibration: CalibrationConfig | None = None
    """Human labels for the ``min_kappa`` gates (``calibration: {labels: labels.csv}``)."""
    state_dir: str = ".assay"
    """Checkpoints and judge cache (relative to the run file)."""
    summary_path: str | None = None
    """Where ``_SUMMARY.json`` goes when the sink has no directory of its own (Kafka); default
    ``<state_dir>/summaries/<sink>/_SUMMARY.json``."""
    s3: dict[str, Any] | None = None
    """S3 connection settings for every ``s3://`` path: ``endpoint_url``, ``region``, ``profile``
    (default: the standard AWS chain, including ``AWS_ENDPOINT_URL``)."""
    push: list[PushSpec] = Field(default_factory=list)
    """Where scores go after the output is published (``assay run``) or on ``assay push``: see
    docs/push.md. Keys come from the environment, never from the run file."""
    rate_store: str | None = None
    """``redis://host:port/db``: every judge that sets no ``shared_limit`` of its own shares its
    rpm/tpm budget through this Redis (across ``--workers`` and ``--shard`` processes)."""

    @field_validator("source", "sink", "dead_letter", mode="before")
    @classmethod
    def _connector_section(cls, v: Any, info: ValidationInfo) -> Any:
        """Each section is validated by the model of the connector its ``type`` names (default:
        from the path's scheme, else ``file``)."""
        return v if v is None else parse_section(v, str(info.field_name))

    @field_validator("push")
    @classmethod
    def _push_names(cls, v: list[PushSpec]) -> list[PushSpec]:
        names = [p.target_name for p in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"two push targets are named {dup[0]!r}: give each a distinct name")
        return v

    @model_validator(mode="before")
    @classmethod
    def _source_ds(cls, data: Any) -> Any:
        """A platform API source reads the run's ``ds`` day unless it names its own window."""
        source = data.get("source") if isinstance(data, dict) else None
        if not isinstance(source, dict) or source.get("type") not in API_SOURCES:
            return data
        ds = data.get("ds")
        if isinstance(ds, str) and day_problem(ds) is None and not any(k in source for k in ("ds", "start", "end")):
            return {**data, "source": {**source, "ds": ds}}
        return data

    @model_validator(mode="before")
    @classmethod
    def _sink_ds(cls, data: Any) -> Any:
        """A lake sink (Parquet rows, a Delta table) writes the run's ``ds`` unless it names its own."""
        sink = data.get("sink") if isinstance(data, dict) else None
        if not isinstance(sink, dict):
            return data
        ds = data.get("ds")
        if day_problem(ds) is not None:
            ds = None  # reported once, as the run's own ``ds``
        path = sink.get("path")
        if sink.get("type") == "delta":
            sink = {**sink, "state_dir": sink.get("state_dir") or data.get("state_dir") or ".assay"}
            day = sink.get("ds") or ds
            if isinstance(day, str):
                sink.setdefault("ds", day)
            return {**data, "sink": sink}
        parquet = sink.get("format") == "parquet" or (isinstance(path, str) and path.endswith(".parquet"))
        if parquet and isinstance(ds, str) and "ds" not in sink:
            return {**data, "sink": {**sink, "ds": ds}}
        return data

    @field_validator("ds")
    @classmethod
    def _day(cls, v: str | None) -> str | None:
        return check_ds(v)

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
        return redis_url(v)

    @model_validator(mode="before")
    @classmethod
    def _rate_store(cls, data: Any) -> Any:
        """``rate_store``: the run's Redis becomes the ``shared_limit`` of every judge, declared or
        inline, that names none of its own."""
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
    def _sampling_source(self) -> RunConfig:
        """Strata minimums need a counting pass: refused for a source without an end."""
        from assay.sampling import unbounded_refusal

        if (why := unbounded_refusal(self)) is not None:
            raise ValueError(why)
        return self

    @model_validator(mode="after")
    def _judges_known(self) -> RunConfig:
        """A judge named by an evaluator must be declared; an inline judge config must be valid."""
        # The one import of this layer from a higher one (tests/unit/test_layers.py KNOWN_UPWARD):
        # a judge's endpoint config is the judges' own model, checked here so that a wrong judge is
        # exit 2 when the run file loads. Lazy: judges/config.py is pydantic and the provider
        # table, without the HTTP client.
        from assay.judges.config import parse_judge_config

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


class RunFileLoader(yaml.SafeLoader):
    """The run file's YAML: YAML 1.1 (PyYAML) reads a bare ``on``, ``off``, ``yes`` or ``no`` as a
    boolean; as a mapping KEY it stays the word, so ``{value: 0.9, on: lower_bound}`` and a rubric's
    ``branches: {yes: …, no: …}`` mean what they say. Values are read as before (a bool field
    accepts ``yes``).

    >>> yaml.load("min_pass_rate: {value: 0.9, on: lower_bound}", Loader=RunFileLoader)
    {'min_pass_rate': {'value': 0.9, 'on': 'lower_bound'}}
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag == _BOOL_TAG and key.style is None:
                key.tag = _STR_TAG
        return super().construct_mapping(node, deep=deep)


_BOOL_TAG = "tag:yaml.org,2002:bool"
_STR_TAG = "tag:yaml.org,2002:str"


def load_yaml(text: str) -> Any:
    """Parse run-file YAML (see :class:`RunFileLoader`); a ``yaml.YAMLError`` on bad syntax."""
    return yaml.load(text, Loader=RunFileLoader)  # a SafeLoader subclass: no arbitrary objects


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_TEMPLATE = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")


def parse_scalar(text: str) -> Any:
    """A CLI value parsed as YAML (``5`` → 5, ``true`` → True, ``[a, b]`` → list), else the text."""
    try:
        return load_yaml(text) if text.strip() else text
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


def stable_run_id(config: RunConfig) -> str:
    """The default run id: a digest of the validated run file (its ``--ds`` included), so a rerun of
    the same day writes the same rows, and another day or another run file gets another id.

    >>> run = {"source": {"path": "t.jsonl"}, "evaluators": ["exact_match"], "sink": {"path": "o/"}}
    >>> a, b = build_config(run, ds="2026-11-21"), build_config(run, ds="2026-11-22")
    >>> stable_run_id(a) == stable_run_id(a.model_copy()), stable_run_id(a) == stable_run_id(b)
    (True, False)
    """
    import hashlib

    text = config.model_dump_json(exclude={"run_id"})
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def redact_values(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every value in ``secrets`` (the ``${ENV}`` values a run file expanded) blanked."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def template_variables(ds: str | None) -> dict[str, str]:
    if ds is None:
        return {}
    check_day(ds, "--ds")
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
    cal = data.get("calibration")
    if isinstance(cal, dict) and isinstance(cal.get("labels"), str):
        cal["labels"] = fix(cal["labels"])
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
    if ds is not None:
        data.setdefault("ds", ds)
    if base_dir is not None:
        _resolve_relative(data, base_dir)
    try:
        data = ai_support_judge(data)  # potato's ai_support: the judge of that name
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        # `from None`: pydantic's own text echoes the input, which may hold an expanded secret
        raise ConfigError(redact_values(format_errors(origin, exc), expanded)) from None
    except ConfigError as exc:
        raise ConfigError(redact_values(f"{origin}: {exc}", expanded)) from None
    config._expanded = frozenset(expanded)
    return config


def expanded_values(config: RunConfig) -> frozenset[str]:
    """The ``${ENV}`` values the run file expanded (6 characters or more): never shown in an
    error message or a summary (:func:`redact_values`)."""
    return config._expanded


def redact_summary(summary: dict[str, Any], secrets: Iterable[str]) -> None:
    """Blank the expanded ``${ENV}`` values in what a summary quotes from the run: its sources, its
    messages and its error (a secret in ``source.path`` must not reach a shared output)."""
    secrets = list(secrets)
    if not secrets:
        return
    for key in ("source", "messages"):
        if isinstance(summary.get(key), list):
            summary[key] = [redact_values(v, secrets) if isinstance(v, str) else v for v in summary[key]]
    error = summary.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        error["message"] = redact_values(error["message"], secrets)


def load_run_file(path: str | Path, *, ds: str | None = None, sets: list[str] | None = None) -> RunConfig:
    """Read, interpolate and validate a run file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read run file: {exc.strerror}") from exc
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}{where}: invalid YAML: {problem}") from exc
    return build_config(data, origin=str(path), ds=ds, sets=sets, base_dir=p.resolve().parent)
