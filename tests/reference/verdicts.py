"""The stand-in model's verdicts for the upstream suites: the same verdict whatever the prompt says.

``yes``: every boolean true, every number at its maximum (1.0 without one), the first of an enum of
labels; ``no``: false, the minimum (0.0), the last label. A request without a JSON schema gets the
text ``yes`` / ``no``. ``mid``: as ``yes``, but every number in the middle of its range (0.5
without one): a judge that finds something partly right (openevals' continuous scores must lie
strictly between 0 and 1). Running each suite once per verdict means no prompt wording can decide a
test: a test passes on the reference in some modes, and must pass on assay in those.

Served by :class:`assay.testing.judge_server.JudgeServerThread` (``rule=yes``) or from the shell:
``python -m assay.testing.judge_server --rule tests.reference.verdicts:yes``.
"""

from __future__ import annotations

from typing import Any

from assay.testing.judge_server import requested_schema


def fill(schema: dict[str, Any], yes: bool, depth: int = 0, mid: bool = False) -> Any:
    """``schema`` filled with one verdict (``mid``: numbers in the middle of their range)."""
    if schema.get("enum"):
        values = schema["enum"]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            return max(values) if yes else min(values)
        return values[0] if yes else values[-1]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return fill(schema[key][0], yes, depth, mid)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        if depth >= 6:
            return {}
        props = schema.get("properties") or {}
        return {k: fill(v, yes, depth + 1, mid) for k, v in props.items() if isinstance(v, dict)}
    if kind == "array":
        items = schema["items"] if isinstance(schema.get("items"), dict) else {"type": "string"}
        return [fill(items, yes, depth + 1, mid) for _ in range(max(1, int(schema.get("minItems", 1))))]
    if kind == "boolean":
        return yes
    if kind in ("number", "integer"):
        top, bottom = float(schema.get("maximum", 1.0)), float(schema.get("minimum", 0.0))
        v = (top + bottom) / 2 if mid else top if yes else bottom
        return int(v) if kind == "integer" else v
    if kind == "null":
        return None
    return "Stand-in reasoning."


def grade(body: dict[str, Any], yes: bool, mid: bool = False) -> Any:
    """The verdict for one request body (OpenAI, Anthropic or function calling)."""
    schema = requested_schema(body, "anthropic") or requested_schema(body, "openai")
    if schema is None:
        tools = body.get("tools") or []
        if tools and body.get("tool_choice"):
            schema = (tools[0].get("function") or {}).get("parameters")
    if schema is None:
        return "yes" if yes else "no"
    value = fill(schema, yes, mid=mid)
    return value if isinstance(value, dict) else {"score": value}


def yes(body: dict[str, Any]) -> Any:
    return grade(body, True)


def no(body: dict[str, Any]) -> Any:
    return grade(body, False)


def mid(body: dict[str, Any]) -> Any:
    return grade(body, True, mid=True)


#: The rule of each verdict mode.
RULES = {"yes": yes, "no": no, "mid": mid}
