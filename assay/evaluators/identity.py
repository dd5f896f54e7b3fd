"""What produced a result: an evaluator's identity, written in every row (``identity``) so that
``assay compare`` can tell two runs scored the same way from two runs that cannot be compared.

The identity of an evaluator is one short string, ``EVALUATOR/PARAMS/PROMPT/JUDGE_MODEL``:

* ``PARAMS``: the first 10 hex digits of a SHA-256 of its params (threshold included) and, when
  the run file declares one, the evaluator's ``version`` (without a version the digest is that of
  the params alone, so declaring none keeps earlier outputs current);
* ``PROMPT``: the same of the prompt text it sends (a prebuilt prompt's template, so an edited
  template changes it even when the params name the same prompt), ``-`` without a prompt;
* ``JUDGE_MODEL``: the judge's configured model, ``-`` without a judge.

Nothing else enters it: how a judge is reached and paced (``base_url``, ``rpm``, ``tpm``,
``max_in_flight``, retries, prices, ``mode: batch``) does not change what a result means, so a
change there keeps every result current. ``assay run`` over a published output and ``assay
backfill`` keep a result whose identity equals the one the run file gives now, and score again
only the pairs whose identity differs (``docs/backfill.md``).

>>> from assay.evaluators.trajectory import TrajectoryMatch
>>> ident = evaluator_identity(TrajectoryMatch(mode="strict"))
>>> ident.split("/")[0], ident.split("/")[2:]
('trajectory_match', ['-', '-'])
>>> parse_identity(ident)["evaluator"]
'trajectory_match'
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any

import orjson

__all__ = ["IDENTITY_PARTS", "evaluator_identity", "parse_identity"]

IDENTITY_PARTS = ("evaluator", "params", "prompt", "judge_model")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:10]


def _stable(value: Any) -> str:
    """A value JSON cannot hold, as text that is the same in every process (no memory address)."""
    name = getattr(value, "__qualname__", None)
    if name is not None:
        return f"{getattr(value, '__module__', '')}.{name}"
    return type(value).__qualname__ if " at 0x" in repr(value) else repr(value)


def _params_digest(params: Any, version: Any = None) -> str:
    try:
        dumped = params.model_dump(exclude={"judge", "model"}) if hasattr(params, "model_dump") else params
    except Exception:  # a params model that cannot dump itself: its repr still identifies it
        dumped = repr(params)
    if version is not None:  # a declared version: a new digest; none keeps the params' own
        dumped = {"params": dumped, "version": str(version)}
    return _digest(orjson.dumps(dumped, default=_stable, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS))


def _prompt_digest(params: Any) -> str:
    prompt = getattr(params, "prompt", None)
    if not isinstance(prompt, str) or not prompt:
        return "-"
    text = prompt
    if prompt.isidentifier():
        from assay.judges.prompts import PROMPTS

        info = PROMPTS.get(prompt)
        if info is not None:
            text = info.template
    return _digest(text.encode())


def _judge_model(ev: Any) -> str:
    params = getattr(ev, "params", None)
    model = getattr(params, "model", None)
    if isinstance(model, str) and model:
        return model.partition(":")[2] or model
    jury = getattr(params, "judges", None)
    if jury:
        from assay.evaluators.jury import judge_label

        return "+".join(judge_label(spec, i) for i, spec in enumerate(jury))
    judge = getattr(params, "judge", None)
    if isinstance(judge, dict):
        return str(judge.get("model") or "-")
    resolve = ev.resolve_judge if ev.offers("resolve_judge") else None  # (a BaseEvaluator)
    if judge is None and resolve is None:
        return "-"
    try:
        found = resolve() if resolve is not None else None
    except Exception:  # no pool (library use) or an unknown name: the run itself reports that
        return "-"
    if inspect.isawaitable(found):
        close = getattr(found, "close", None)
        if close is not None:
            close()
        return "-"
    config = getattr(found, "config", None)
    value = getattr(config, "model", None) or getattr(found, "model", None)
    return str(value) if value else "-"


def evaluator_identity(ev: Any) -> str:
    """The identity string of an evaluator instance (see the module docstring)."""
    name = str(getattr(ev, "name", type(ev).__name__))
    params = getattr(ev, "params", None)
    model = _judge_model(ev) if hasattr(params, "judge") or hasattr(params, "model") else "-"
    version = getattr(ev, "version", None)
    return "/".join((name, _params_digest(params, version), _prompt_digest(params), model.replace("/", "_")))


def parse_identity(text: str) -> dict[str, str | None]:
    """An identity string split into :data:`IDENTITY_PARTS` (``-`` becomes None)."""
    parts = text.split("/", 3)
    parts += ["-"] * (4 - len(parts))
    return {name: (None if v == "-" else v) for name, v in zip(IDENTITY_PARTS, parts, strict=True)}
