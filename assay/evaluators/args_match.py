"""Tool-argument matchers shared by the trajectory and tool-use evaluators.

A matcher is ``(output_args, reference_args) -> bool`` and is always called in that order
(openevals 0.2.2 semantics; agentevals and potato swap the order in subset mode, see
docs/semantics.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from assay.exceptions import ConfigError
from assay.loading import load_callable

ArgsMode = Literal["exact", "ignore", "subset", "superset"]
ARGS_MODES: tuple[str, ...] = ("exact", "ignore", "subset", "superset")
Matcher = Callable[[dict[str, Any], dict[str, Any]], bool]

_MISSING = object()


def _exact(out: dict[str, Any], ref: dict[str, Any]) -> bool:
    return out == ref


def _ignore(out: dict[str, Any], ref: dict[str, Any]) -> bool:
    return True


def _subset(out: dict[str, Any], ref: dict[str, Any]) -> bool:
    """Every key/value of the output args is present and equal in the reference args."""
    for k, v in out.items():  # noqa: SIM110 - a plain loop is faster than all() on the hot path
        if k not in ref or ref[k] != v:
            return False
    return True


def _superset(out: dict[str, Any], ref: dict[str, Any]) -> bool:
    """Every key/value of the reference args is present and equal in the output args."""
    for k, v in ref.items():  # noqa: SIM110 - a plain loop is faster than all() on the hot path
        if k not in out or out[k] != v:
            return False
    return True


MATCHERS: dict[str, Matcher] = {"exact": _exact, "ignore": _ignore, "subset": _subset, "superset": _superset}


def _resolve(args: Any, steps: list[str]) -> Any:
    """The value at ``steps`` in ``args``. A dict key that itself contains dots (``{"a.b": 1}``)
    is addressed by the same path: at each level the longest run of steps naming a key wins, so
    ``a.b`` never resolves to "missing" on a record whose key is literally ``a.b``."""
    cur = args
    i = 0
    while i < len(steps):
        if isinstance(cur, dict):
            for j in range(len(steps), i, -1):
                key = steps[i] if j == i + 1 else ".".join(steps[i:j])
                if key in cur:
                    cur, i = cur[key], j
                    break
            else:
                return _MISSING
        elif isinstance(cur, list) and steps[i].lstrip("-").isdigit() and -len(cur) <= int(steps[i]) < len(cur):
            cur, i = cur[int(steps[i])], i + 1
        else:
            return _MISSING
    return cur


def field_path_matcher(paths: list[str]) -> Matcher:
    """Compare only the given dotted paths (list indices allowed: ``items.0.id``; a key that
    contains dots is reached by its full text, unlike openevals/agentevals, where it cannot be).

    A path missing on both sides matches; missing on one side only (even if the other side holds
    ``null``) does not.
    """
    split = [p.split(".") for p in paths]

    def match(out: dict[str, Any], ref: dict[str, Any]) -> bool:
        for steps in split:
            a = _resolve(out, steps)
            b = _resolve(ref, steps)
            if a is _MISSING and b is _MISSING:
                continue
            if a is _MISSING or b is _MISSING or a != b:
                return False
        return True

    return match


def import_callable(target: str) -> Callable[..., Any]:
    """Import ``"module:function"``; ConfigError when it is not there or not callable."""
    return load_callable(target)


def build_override(tool: str, spec: Any) -> Matcher | None:
    """Turn one ``tool_args_match_overrides`` entry into a matcher (None = use the default mode).

    Accepted: a mode string, a list of field paths, a callable, or ``{"callable": "module:fn"}``
    (the run-file spelling of a callable). An unknown mode string is a ConfigError (openevals
    silently treats it as ``ignore``).
    """
    if isinstance(spec, str):
        if spec not in MATCHERS:
            raise ConfigError(
                f"tool_args_match_overrides[{tool!r}]: unknown mode {spec!r} "
                f"(expected one of {', '.join(ARGS_MODES)}, a list of field paths, or a callable)"
            )
        return MATCHERS[spec]
    if isinstance(spec, list | tuple):
        if not spec:
            return None
        if not all(isinstance(p, str) and p for p in spec):
            raise ConfigError(f"tool_args_match_overrides[{tool!r}]: field paths must be non-empty strings")
        return field_path_matcher(list(spec))
    if isinstance(spec, Mapping) and set(spec) == {"callable"} and isinstance(spec["callable"], str):
        fn = import_callable(spec["callable"])
        return lambda out, ref: bool(fn(out, ref))
    if callable(spec):
        return lambda out, ref: bool(spec(out, ref))
    raise ConfigError(f"tool_args_match_overrides[{tool!r}]: invalid override {spec!r}")


def build_overrides(overrides: Mapping[str, Any] | None, evaluator: str = "") -> dict[str, Matcher]:
    """Build every override; a ConfigError names the evaluator, the key and the tool."""
    table: dict[str, Matcher] = {}
    for tool, spec in (overrides or {}).items():
        try:
            m = build_override(tool, spec)
        except ConfigError as exc:
            where = f"evaluator {evaluator!r}: params." if evaluator else ""
            msg = str(exc)
            prefix = f"tool_args_match_overrides[{tool!r}]: "
            raise ConfigError(f"{where}{msg if msg.startswith(prefix) else prefix + msg}") from exc
        if m is not None:
            table[tool] = m
    return table
