"""Structured verdicts: the JSON schema a judge is asked to fill, and parsing what it answered.

A verdict has one of four score kinds:

* ``boolean`` — pass/fail (``true``/``false``);
* ``continuous`` — a number in [0, 1] (out-of-range numbers are clamped, with a note);
* ``choices`` — one of a fixed list of numbers or labels;
* ``label`` — free text (a category the prompt asks for, e.g. a language name).

The schema asks for ``reasoning`` first, then ``score`` (so the model reasons before it commits),
unless ``use_reasoning`` is off.

Parsing takes the provider's structured ``data`` when there is one; otherwise it salvages the
verdict from the text: ``<think>`` blocks are stripped, then the text is tried as JSON, then fenced
JSON blocks, then the last JSON object anywhere in the text, and finally a recognised value next
to the word "score" (``Score: 0.8``, ``the score should be: true``). When nothing works a
:class:`~assay.exceptions.VerdictParseError` is raised with the raw text kept; it never becomes a
silent zero.

Booleans are read strictly: ``"false"`` is False (not Python truthiness), ``"maybe"`` is an error.

>>> spec = VerdictSpec("boolean")
>>> parse_verdict_text('I think so.\\n```json\\n{"reasoning": "ok", "score": "false"}\\n```', spec).value
False
>>> parse_verdict_text("Thus, the score should be: 0.7", VerdictSpec("continuous")).score
0.7
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from assay.exceptions import VerdictParseError
from assay.judges.base import JudgeResponse

ScoreKind = Literal["boolean", "continuous", "choices", "label"]
Choice = float | str

_TRUE = frozenset({"true", "yes", "pass", "passed", "y"})
_FALSE = frozenset({"false", "no", "fail", "failed", "n"})
_THINK = re.compile(r"<(think|thinking|thought|inner_monologue)>.*?(</\1>|\Z)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)\n?```", re.DOTALL)
_NEAR_SCORE = re.compile(
    r"\b(?:score|verdict|answer|choice|label)\b[^\n\w]{0,20}(?:should\s+be|is)?[^\n\w-]{0,8}"
    r"(\"[^\"\n]{1,80}\"|'[^'\n]{1,80}'|-?\d+(?:\.\d+)?|[A-Za-z][\w &/-]{0,60})",
    re.IGNORECASE,
)
#: How much raw text an error keeps (the raw output goes into the Result's metadata).
RAW_LIMIT = 4000


@dataclass(frozen=True, slots=True)
class VerdictSpec:
    """What kind of verdict to ask for.

    ``choices`` holds the allowed values for kind ``choices``; ``choice_scores`` optionally maps
    each choice to the score it stands for (numbers in [0, 1] map to themselves by default).
    """

    kind: ScoreKind = "boolean"
    use_reasoning: bool = True
    choices: tuple[Choice, ...] = ()
    choice_scores: dict[str, float] | None = None
    score_field: str = "score"

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the verdict object (reasoning first, then the score)."""
        return verdict_schema(self)


@dataclass(slots=True)
class Verdict:
    """A parsed verdict: the judge's raw ``value`` (bool, number, label), its ``score`` in [0, 1]
    (None for a label without a score), the reasoning, and notes about any repair made."""

    value: Any
    score: float | None
    reasoning: str | None = None
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    salvaged: bool = False


# --------------------------------------------------------------------------- schema


def reasoning_property() -> dict[str, Any]:
    return {
        "type": "string",
        "description": (
            "Your step-by-step thinking about the criteria, written before you decide. "
            "Finish with one sentence stating the score you give."
        ),
    }


def score_property(spec: VerdictSpec) -> dict[str, Any]:
    if spec.kind == "choices":
        if all(isinstance(c, int | float) and not isinstance(c, bool) for c in spec.choices):
            return {
                "type": "number",
                "enum": list(spec.choices),
                "description": "The allowed value that best describes how well the criteria are met.",
            }
        return {
            "type": "string",
            "enum": [str(c) for c in spec.choices],
            "description": "Exactly one of the allowed options.",
        }
    if spec.kind == "continuous":
        return {
            "type": "number",
            "description": (
                "A number from 0.0 to 1.0: 1.0 when the criteria are fully met, 0.0 when they are "
                "not met at all, values in between for partial fulfilment."
            ),
        }
    if spec.kind == "label":
        return {"type": "string", "description": "The label the instructions ask for."}
    return {"type": "boolean", "description": "true when the criteria are met, false otherwise."}


def verdict_schema(spec: VerdictSpec) -> dict[str, Any]:
    """``{"type": "object", "properties": {"reasoning"?, "score"}, "required": [...]}``."""
    props: dict[str, Any] = {}
    if spec.use_reasoning:
        props["reasoning"] = reasoning_property()
    props[spec.score_field] = score_property(spec)
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": props,
        "required": list(props),
    }


# --------------------------------------------------------------------------- salvage


def strip_thinking(text: str) -> str:
    """Remove ``<think>``-style blocks (an unclosed block runs to the end of the text)."""
    return _THINK.sub("", text).strip()


def _loads_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last top-level JSON object embedded anywhere in ``text`` (or None)."""
    decoder = json.JSONDecoder()
    found: dict[str, Any] | None = None
    i = text.find("{")
    while i != -1:
        try:
            value, end = decoder.raw_decode(text, i)
        except (ValueError, RecursionError):
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            found = value
        i = text.find("{", end)
    return found


def extract_json_object(text: str) -> dict[str, Any] | None:
    """Salvage a JSON object from model text: direct JSON, fenced JSON, then the last object."""
    body = strip_thinking(text)
    if not body:
        return None
    direct = _loads_object(body)
    if direct is not None:
        return direct
    for block in reversed(_FENCE.findall(body)):
        obj = _loads_object(block.strip())
        if obj is not None:
            return obj
    return last_json_object(body)


def _raw(text: str) -> str:
    return text if len(text) <= RAW_LIMIT else text[:RAW_LIMIT] + "…"


def response_object(response: JudgeResponse) -> tuple[dict[str, Any], bool]:
    """The verdict object of a response: its structured ``data``, else one salvaged from the text.

    Returns ``(object, salvaged)``; raises VerdictParseError when the text holds no JSON object.
    """
    if response.data is not None:
        return response.data, False
    obj = extract_json_object(response.text or "")
    if obj is None:
        raise VerdictParseError("the judge's answer contains no JSON object", raw=_raw(response.text or ""))
    return obj, True


# --------------------------------------------------------------------------- usable answers

# booleans and numbers as leniently as the verdict parser reads them ("true", "0.5")
_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: coerce_bool(v) is not None,
    "integer": lambda v: (n := coerce_number(v)) is not None and n.is_integer(),
    "number": lambda v: coerce_number(v) is not None,
    "null": lambda v: v is None,
}


def conforms(value: Any, schema: Any) -> bool:
    """Whether ``value`` fits the parts of a JSON schema that say what an answer must hold:
    ``type`` (booleans and numbers read as the verdict parser reads them), ``enum`` (labels
    compared ignoring case), ``required`` (present and not null), ``properties`` and ``items``.
    Keywords beyond those are not checked.

    >>> schema = {"type": "object", "required": ["reasoning", "score"],
    ...           "properties": {"reasoning": {"type": "string"}, "score": {"type": "boolean"}}}
    >>> conforms({"reasoning": "ok", "score": True}, schema), conforms({"reasoning": "ok"}, schema)
    (True, False)
    >>> conforms({"reasoning": "ok", "score": None}, schema), conforms({"reasoning": "ok", "score": "maybe"}, schema)
    (False, False)
    """
    if not isinstance(schema, dict):
        return True
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
    if kinds and not any(_JSON_TYPES.get(k, lambda _v: True)(value) for k in kinds):
        return False
    enum = schema.get("enum")
    if isinstance(enum, list) and match_choice(value, enum) is None and value not in enum:
        return False
    if isinstance(value, dict):
        required = schema.get("required")
        if isinstance(required, list) and any(value.get(k) is None for k in required):
            return False
        props = schema.get("properties")
        if isinstance(props, dict) and not all(conforms(value[k], props[k]) for k in props if k in value):
            return False
    items = schema.get("items")
    return not (isinstance(value, list) and isinstance(items, dict) and not all(conforms(v, items) for v in value))


def usable_answer(text: str, data: Any, schema: dict[str, Any] | None) -> bool:
    """Whether a judge's answer is worth caching (and a cached one worth replaying): any text when
    no schema was asked for, else an object — the structured data or the one in the text — that
    :func:`conforms` to the schema. An answer without its score is asked again next time, never
    replayed as the same error."""
    if schema is None:
        return bool(text.strip())
    obj = data if isinstance(data, dict) else extract_json_object(strip_thinking(text or ""))
    return obj is not None and conforms(obj, schema)


# --------------------------------------------------------------------------- value checks


def coerce_bool(value: Any) -> bool | None:
    """A real bool, ``"true"``/``"false"``/``"yes"``/``"no"``/``"pass"``/``"fail"`` or 1/0; else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().strip("\"'.").lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    return None


def coerce_number(value: Any) -> float | None:
    """A finite number (numeric strings accepted, bools not); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip().rstrip("."))
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def match_choice(value: Any, choices: Sequence[Choice]) -> Choice | None:
    """The allowed choice ``value`` stands for: equal numbers, or labels equal ignoring case/space."""
    number = coerce_number(value)
    label = value.strip().strip("\"'.").casefold() if isinstance(value, str) else None
    for c in choices:
        if isinstance(c, int | float) and not isinstance(c, bool):
            if number is not None and math.isclose(number, float(c), abs_tol=1e-9):
                return c
        elif label is not None and label == str(c).casefold():
            return c
    return None


def choice_score(choice: Choice, spec: VerdictSpec) -> float | None:
    """The score of a choice: from ``choice_scores``; a number in [0, 1] is itself; other numbers
    are scaled min→0 … max→1 over the numeric choices; a label without a score → None."""
    if spec.choice_scores is not None and str(choice) in spec.choice_scores:
        return float(spec.choice_scores[str(choice)])
    if isinstance(choice, str):
        return None
    numbers = [float(c) for c in spec.choices if isinstance(c, int | float)]
    if all(0.0 <= n <= 1.0 for n in numbers):
        return float(choice)
    lo, hi = min(numbers), max(numbers)
    return 1.0 if hi == lo else (float(choice) - lo) / (hi - lo)


def validate_score(value: Any, spec: VerdictSpec, raw: str) -> tuple[Any, float | None, list[str]]:
    """Check a score value against the spec: ``(value, score, notes)`` or VerdictParseError."""
    notes: list[str] = []
    if spec.kind == "boolean":
        b = coerce_bool(value)
        if b is None:
            raise VerdictParseError(f"score {value!r} is not a boolean", raw=_raw(raw))
        return b, 1.0 if b else 0.0, notes
    if spec.kind == "continuous":
        number = coerce_number(value)
        if number is None:
            raise VerdictParseError(f"score {value!r} is not a number", raw=_raw(raw))
        if not 0.0 <= number <= 1.0:
            clamped = min(1.0, max(0.0, number))
            notes.append(f"score {number:g} outside [0, 1], clamped to {clamped:g}")
            number = clamped
        return number, number, notes
    if spec.kind == "choices":
        choice = match_choice(value, spec.choices)
        if choice is None:
            allowed = ", ".join(repr(c) for c in spec.choices)
            raise VerdictParseError(f"score {value!r} is not one of the choices ({allowed})", raw=_raw(raw))
        return choice, choice_score(choice, spec), notes
    if not isinstance(value, str) or not value.strip():
        raise VerdictParseError(f"label {value!r} is not a non-empty string", raw=_raw(raw))
    return value.strip(), None, notes


# --------------------------------------------------------------------------- verdicts


def _from_object(obj: dict[str, Any], spec: VerdictSpec, raw: str, salvaged: bool) -> Verdict:
    if spec.score_field not in obj:
        keys = ", ".join(map(str, obj)) or "none"
        raise VerdictParseError(f"the verdict has no {spec.score_field!r} field (keys: {keys})", raw=_raw(raw))
    value, score, notes = validate_score(obj[spec.score_field], spec, raw)
    reasoning = obj.get("reasoning")
    if reasoning is not None and not isinstance(reasoning, str):
        reasoning = json.dumps(reasoning, ensure_ascii=False)
    return Verdict(value, score, reasoning, notes, obj, salvaged)


def _near_score(text: str, spec: VerdictSpec) -> Any:
    """A value written next to "score"/"verdict"/"answer" (the last one wins), or None."""
    for m in reversed(list(_NEAR_SCORE.finditer(text))):
        token = m.group(1).strip().strip("\"'").strip()
        candidates = [token, *token.split()[:1]]
        for cand in candidates:
            cand = cand.rstrip(".,;:")
            if spec.kind == "boolean" and coerce_bool(cand) is not None:
                return cand
            if spec.kind == "continuous" and coerce_number(cand) is not None:
                return cand
            if spec.kind == "choices" and match_choice(cand, spec.choices) is not None:
                return cand
    return None


def _last_line_value(text: str, spec: VerdictSpec) -> Any:
    """A bare answer on the last line (``true``, ``0.5``, a choice), or a unique choice in the text."""
    last = text.strip().splitlines()[-1].strip().strip("*`\"'.").strip() if text.strip() else ""
    if spec.kind == "boolean" and coerce_bool(last) is not None:
        return last
    if spec.kind == "continuous" and coerce_number(last) is not None:
        return last
    if spec.kind == "choices":
        if match_choice(last, spec.choices) is not None:
            return last
        labels = [c for c in spec.choices if isinstance(c, str)]
        present = [c for c in labels if re.search(rf"(?<!\w){re.escape(c)}(?!\w)", text, re.IGNORECASE)]
        if len(present) == 1:
            return present[0]
    return None


def parse_verdict_text(text: str, spec: VerdictSpec) -> Verdict:
    """Salvage a verdict from free text (see the module docstring for the order of attempts)."""
    body = strip_thinking(text or "")
    obj = extract_json_object(body) if body else None
    if obj is not None and spec.score_field in obj:
        return _from_object(obj, spec, text, salvaged=True)
    if body and spec.kind != "label":
        value = _near_score(body, spec)
        if value is None:
            value = _last_line_value(body, spec)
        if value is not None:
            v, score, notes = validate_score(value, spec, text)
            notes.append("verdict salvaged from free text")
            return Verdict(v, score, body, notes, {}, salvaged=True)
    if obj is not None:
        return _from_object(obj, spec, text, salvaged=True)  # raises: names the missing field
    raise VerdictParseError("no verdict could be salvaged from the judge's answer", raw=_raw(text or ""))


def parse_verdict(response: JudgeResponse, spec: VerdictSpec) -> Verdict:
    """The verdict of a judge response: structured ``data`` first, else salvaged from the text."""
    if response.data is not None:
        return _from_object(response.data, spec, response.text or json.dumps(response.data), salvaged=False)
    return parse_verdict_text(response.text or "", spec)
