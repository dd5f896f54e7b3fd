"""Heuristic / string evaluators: exact match, contains, regex, edit distance, JSON validity and schema.

They compare the agent's final output (``trace.final_output``) with the reference's final output
(``trace.reference.final_output``) or with values given in params. Where openevals and potato
disagree, the choice and the reason are written in docs/evaluators.md; in short:

* values that are JSON (dicts, lists, numbers, booleans) are compared as JSON text with sorted
  keys (deep, key order ignored); text is compared as text (stripped by default); text equals a
  number or boolean whose text it is (``"42"`` == ``42``);
* when the reference is missing the result is not scored (score None), never a silent 0;
* text of a non-string value is its JSON text (openevals), not a Python repr (potato).

>>> ExactMatch().evaluate(outputs={"a": 1, "b": [1, 2]}, reference_outputs={"b": [1, 2], "a": 1}).score
1.0
>>> EditDistance().evaluate(outputs="kitten", reference_outputs="sitting").value
3
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import orjson
from pydantic import Field, field_validator
from rapidfuzz.distance import Levenshtein

from assay.evaluators.base import Evaluator, EvaluatorParams
from assay.exceptions import ConfigError
from assay.records import Result
from assay.traces.model import Trace

#: Keys potato unwraps when an output is a dict holding the answer text (checked in this order).
TEXT_KEYS: tuple[str, ...] = ("output", "text", "content", "answer", "final_answer")

_MISSING = object()


def to_json_text(value: Any) -> str:
    """JSON text of a value (keys in their order, ``", "``/``": "`` separators like ``json.dumps``).

    Unlike openevals, non-ASCII characters are kept as they are (an edit distance over ``\\u00e9``
    escapes would be meaningless); values JSON cannot represent fall back to ``str()``.
    """
    return json.dumps(value, ensure_ascii=False, default=str)


def as_text(value: Any, *, unwrap: bool = True) -> str:
    """The text an evaluator reads from an output value.

    None → ``""``; a string → itself; with ``unwrap``, a dict whose ``output``/``text``/``content``/
    ``answer``/``final_answer`` (first found) is a string → that string (potato's convenience);
    anything else → its JSON text.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if unwrap and isinstance(value, dict):
        for k in TEXT_KEYS:
            v = value.get(k)
            if isinstance(v, str):
                return v
    return to_json_text(value)


def reference_value(trace: Trace) -> Any:
    """The reference's final output, or ``_MISSING`` when the trace has no reference, or an empty
    reference text against a non-empty output (a silent 0 there would not be a comparison)."""
    ref = trace.reference
    if ref is None:
        return _MISSING
    value = ref.final_output
    out = trace.final_output
    if isinstance(value, str) and not value.strip() and not (out is None or (isinstance(out, str) and not out.strip())):
        return _MISSING  # both empty still compares equal (1.0), as in openevals and potato
    return value


def no_reference(key: str) -> Result:
    return Result(key, None, None, "no reference output to compare with")


def json_equal(a: Any, b: Any) -> bool:
    """Deep JSON equality: dict key order is irrelevant, list order matters, ``1 == 1.0``, but a
    boolean never equals a number (``True != 1``) and a string never equals a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def canonical_json(value: Any) -> str:
    """JSON text with sorted keys: two values are exact-match equal when these texts are equal
    (openevals): key order never matters, ``1 != 1.0``, ``True != 1``, list order matters."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


_FENCE = re.compile(r"^\s*```[\w+-]*[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)


def strip_code_fence(text: str) -> str:
    """``'```json\\n{...}\\n```'`` → ``'{...}'`` (text without a surrounding fence is unchanged)."""
    m = _FENCE.match(text)
    return m.group(1) if m else text


# --------------------------------------------------------------------------------------------
# exact_match


class ExactMatchParams(EvaluatorParams):
    case_sensitive: bool = True
    """Compare text case-sensitively (False lowercases both sides, also strings inside JSON values)."""
    strip: bool = True
    """Strip leading/trailing whitespace from text before comparing (potato's default)."""
    normalize_whitespace: bool = False
    """Collapse every run of whitespace inside text into one space."""
    type_strict: bool = False
    """False: text equals a number or boolean whose text it is (``"1"`` == ``1``, ``"True"`` == ``True``;
    potato). True: a string never equals a non-string (openevals)."""


class ExactMatch(Evaluator[ExactMatchParams]):
    """The output equals the reference: text after normalisation, JSON values by deep equality."""

    name: ClassVar[str] = "exact_match"
    reads_scenario: ClassVar[bool] = False
    description: ClassVar[str] = (
        "The output equals the reference (text after strip/case options; JSON values deeply, key order ignored)."
    )
    Params = ExactMatchParams
    example: ClassVar[dict[str, Any]] = {"case_sensitive": False}

    def _norm_text(self, s: str) -> str:
        p = self.params
        if p.normalize_whitespace:
            s = " ".join(s.split())
        elif p.strip:
            s = s.strip()
        if not p.case_sensitive:
            s = s.casefold()
        return s

    def _norm_value(self, v: Any) -> Any:
        if isinstance(v, str):
            return self._norm_text(v)
        if self.params.case_sensitive:
            return v
        if isinstance(v, dict):
            return {k: self._norm_value(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [self._norm_value(x) for x in v]
        return v

    def equal(self, out: Any, ref: Any) -> bool:
        """Whether two values are equal under this evaluator's params."""
        out_text, ref_text = isinstance(out, str), isinstance(ref, str)
        if out_text and ref_text:
            return self._norm_text(out) == self._norm_text(ref)
        if out_text or ref_text:
            text, value = (out, ref) if out_text else (ref, out)
            if self.params.type_strict:
                return False
            if value is None:  # no output at all equals the empty text (potato)
                return self._norm_text(text) == ""
            if isinstance(value, bool | int | float):  # potato's text of a scalar: 1, 1.0, True
                return self._norm_text(text) == self._norm_text(str(value))
            return False  # text never equals an object or a list
        return canonical_json(self._norm_value(out)) == canonical_json(self._norm_value(ref))

    def score(self, trace: Trace) -> Result:
        ref = reference_value(trace)
        if ref is _MISSING:
            return no_reference(self.key)
        ok = self.equal(trace.final_output, ref)
        return Result(self.key, 1.0 if ok else 0.0, ok, "exact match" if ok else "output differs from reference")


# --------------------------------------------------------------------------------------------
# contains


class ContainsParams(EvaluatorParams):
    substring: str | list[str] | None = None
    """The needle or a list of needles; None = the reference output's text (a list = several needles)."""
    mode: Literal["any", "all"] = "all"
    """With several needles: pass when all of them (default) or any of them occur."""
    case_sensitive: bool = False
    """Match case-sensitively (potato's default is case-insensitive)."""
    negate: bool = False
    """Invert the verdict (with mode "any": pass when none of the needles occurs)."""


class Contains(Evaluator[ContainsParams]):
    """The output text contains a substring (or any/all of several); the needle defaults to the reference."""

    name: ClassVar[str] = "contains"
    reads_scenario: ClassVar[bool] = False
    description: ClassVar[str] = "The output contains a substring, or any/all of a list (default: the reference text)."
    Params = ContainsParams
    example: ClassVar[dict[str, Any]] = {"substring": ["refund", "order"], "mode": "all"}

    def setup(self) -> None:
        sub = self.params.substring
        self._needles: list[str] | None = None if sub is None else [sub] if isinstance(sub, str) else list(sub)

    def score(self, trace: Trace) -> Result:
        needles = self._needles
        if needles is None:
            # potato: an empty needle never matches (0.0), so "" is not "no reference" here
            ref = _MISSING if trace.reference is None else trace.reference.final_output
            if ref is _MISSING:
                return Result(self.key, None, None, "no substring in params and no reference output")
            needles = [as_text(x) for x in ref] if isinstance(ref, list) else [as_text(ref)]
        hay = as_text(trace.final_output)
        cs = self.params.case_sensitive
        if not cs:
            hay = hay.casefold()
        # an empty needle never matches (potato): "contains nothing" is not a useful pass
        found = [n for n in needles if n and (n if cs else n.casefold()) in hay]
        missing = [n for n in needles if n not in found]
        ok = bool(needles) and (not missing if self.params.mode == "all" else bool(found))
        ok = ok != self.params.negate
        comment = f"found {len(found)} of {len(needles)}" + (f"; missing {missing!r}" if missing else "")
        return Result(self.key, 1.0 if ok else 0.0, ok, comment, {"found": found, "missing": missing})


# --------------------------------------------------------------------------------------------
# regex_match

_FLAG_NAMES = {
    "i": "IGNORECASE",
    "m": "MULTILINE",
    "s": "DOTALL",
    "x": "VERBOSE",
    "a": "ASCII",
    "u": "UNICODE",
}


def _flag_value(flag: str | int, mod: Any) -> int:
    if isinstance(flag, int):
        return flag
    name = flag.strip().upper()
    name = _FLAG_NAMES.get(name.lower(), name) if len(name) == 1 else name.removeprefix("RE.")
    value = getattr(mod, name, None)
    if not isinstance(value, int) or name.startswith("_"):
        raise ValueError(
            f"unknown regex flag {flag!r} (use IGNORECASE, MULTILINE, DOTALL, VERBOSE, ASCII or i/m/s/x/a)"
        )
    return value


class RegexMatchParams(EvaluatorParams):
    pattern: str
    """The regular expression (Python syntax, run by the ``regex`` engine with a timeout)."""
    flags: int | str | list[str | int] = 0
    """Flags as an int, a name (``IGNORECASE``, ``i``), or a list of names."""
    match: Literal["search", "match", "fullmatch"] = "search"
    """search: anywhere in the text (potato); match: at the start; fullmatch: the whole text."""
    negate: bool = False
    """Invert the verdict: pass when the pattern does NOT match (e.g. "no e-mail address in the answer")."""
    timeout: float = Field(1.0, gt=0)
    """Seconds a single match may take; a pattern that backtracks longer gives an error result."""


class RegexMatch(Evaluator[RegexMatchParams]):
    """The output text matches a regular expression (compiled once; every match runs under a timeout)."""

    name: ClassVar[str] = "regex_match"
    reads_scenario: ClassVar[bool] = False
    description: ClassVar[str] = "The output matches a regular expression (search | match | fullmatch), with a timeout."
    Params = RegexMatchParams
    example: ClassVar[dict[str, Any]] = {"pattern": r"order #\d+", "flags": ["IGNORECASE"]}

    def __init__(self, params: Any = None, /, **kwargs: Any) -> None:
        # potato's spelling: RegexMatch(r"\d+") with the pattern as the positional argument
        if isinstance(params, str):
            params = {"pattern": params}
        super().__init__(params, **kwargs)

    def setup(self) -> None:
        # a C engine whose matching loop honours a timeout (stdlib re cannot be stopped)
        import regex  # type: ignore[import-untyped,unused-ignore]

        p = self.params
        raw = p.flags if isinstance(p.flags, list) else [p.flags]
        try:
            flags = 0
            for f in raw:
                flags |= _flag_value(f, regex)
            self._pattern = regex.compile(p.pattern, flags | regex.VERSION0)
        except (ValueError, regex.error) as exc:
            raise ConfigError(f"evaluator {self.name!r}: params.pattern/flags: {exc}") from exc
        self._run: Callable[..., Any] = getattr(self._pattern, p.match)

    def score(self, trace: Trace) -> Result:
        text = as_text(trace.final_output)
        try:
            m = self._run(text, timeout=self.params.timeout)
        except TimeoutError:
            return Result.from_error(
                self.key,
                f"regex took longer than {self.params.timeout}s on a {len(text)}-character output "
                "(catastrophic backtracking?)",
            )
        ok = (m is not None) != self.params.negate
        md: dict[str, Any] = {}
        if m is not None:
            md = {"match": m.group(0)[:200], "span": list(m.span())}
        verdict = "matched" if m is not None else "no match"
        return Result(self.key, 1.0 if ok else 0.0, ok, verdict, md)


# --------------------------------------------------------------------------------------------
# edit_distance


class EditDistanceParams(EvaluatorParams):
    case_sensitive: bool = True
    """Compare case-sensitively."""
    strip: bool = False
    """Strip surrounding whitespace from both texts first."""


class EditDistance(Evaluator[EditDistanceParams]):
    """Normalised Levenshtein similarity: 1 - distance / max(len); non-strings compared as JSON text."""

    name: ClassVar[str] = "edit_distance"
    reads_scenario: ClassVar[bool] = False
    description: ClassVar[str] = "Levenshtein similarity 1 - distance/max(len) between output and reference."
    Params = EditDistanceParams
    example: ClassVar[dict[str, Any]] = {"case_sensitive": False}

    def _text(self, v: Any) -> str:
        s = as_text(v, unwrap=False)
        if self.params.strip:
            s = s.strip()
        return s if self.params.case_sensitive else s.casefold()

    def score(self, trace: Trace) -> Result:
        ref = reference_value(trace)
        if ref is _MISSING:
            return no_reference(self.key)
        a, b = self._text(trace.final_output), self._text(ref)
        d = Levenshtein.distance(a, b)
        maxlen = max(len(a), len(b))
        score = 1.0 - d / maxlen if maxlen else 1.0
        return Result(self.key, score, d, f"edit distance {d} over max length {maxlen}")


# --------------------------------------------------------------------------------------------
# json_valid / json_schema_match


class JsonValidParams(EvaluatorParams):
    strip_code_fence: bool = False
    """Accept JSON wrapped in a markdown code fence (```json ... ```)."""


def _parse_output(value: Any, strip_fence: bool) -> tuple[Any, str | None]:
    """The JSON value of an output: a non-string value is already JSON; text is parsed strictly."""
    if not isinstance(value, str):
        if value is None:
            return _MISSING, "no output"
        return value, None
    text = strip_code_fence(value) if strip_fence else value
    try:
        return orjson.loads(text), None
    except orjson.JSONDecodeError as exc:
        return _MISSING, str(exc)


class JsonValid(Evaluator[JsonValidParams]):
    """The output is valid JSON (strict RFC 8259: no NaN/Infinity); a JSON value output is valid."""

    name: ClassVar[str] = "json_valid"
    reads_scenario: ClassVar[bool] = False
    description: ClassVar[str] = "The output is valid JSON (strict: NaN/Infinity rejected)."
    Params = JsonValidParams
    example: ClassVar[dict[str, Any]] = {"strip_code_fence": True}

    def score(self, trace: Trace) -> Result:
        _, err = _parse_output(trace.final_output, self.params.strip_code_fence)
        ok = err is None
        return Result(self.key, 1.0 if ok else 0.0, ok, "valid JSON" if ok else f"invalid JSON: {err}")


class JsonSchemaMatchParams(EvaluatorParams):
    json_schema: dict[str, Any] = Field(alias="schema")
    """The JSON Schema the output must satisfy (any draft jsonschema supports; checked at build time)."""
    strip_code_fence: bool = False
    """Accept JSON wrapped in a markdown code fence (```json ... ```)."""
    max_errors: int = 5
    """How many validation errors to list in the metadata."""

    @field_validator("json_schema", mode="before")
    @classmethod
    def _schema_from_text(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                return json.loads(v)
            except json.JSONDecodeError as exc:
                raise ValueError(f"schema is not valid JSON: {exc}") from exc
        return v


class JsonSchemaMatch(Evaluator[JsonSchemaMatchParams]):
    """The output parses as JSON and validates against a JSON Schema."""

    name: ClassVar[str] = "json_schema_match"
    reads_scenario: ClassVar[bool] = False
    description: ClassVar[str] = "The output is JSON that validates against a JSON Schema."
    Params = JsonSchemaMatchParams
    example: ClassVar[dict[str, Any]] = {
        "schema": {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}}
    }

    def __init__(self, params: Any = None, /, **kwargs: Any) -> None:
        # potato's spelling: JSONSchemaMatch(schema) with the schema as the positional argument
        fields = {"schema", *JsonSchemaMatchParams.model_fields}
        if isinstance(params, dict) and "schema" not in kwargs and params and not params.keys() <= fields:
            params = {"schema": params}
        super().__init__(params, **kwargs)

    def setup(self) -> None:
        import jsonschema

        schema = self.params.json_schema
        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ConfigError(
                f"evaluator {self.name!r}: params.schema is not a valid JSON Schema: {exc.message}"
            ) from exc
        self._validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        self._best_match = jsonschema.exceptions.best_match

    def score(self, trace: Trace) -> Result:
        data, err = _parse_output(trace.final_output, self.params.strip_code_fence)
        if err is not None:
            return Result(self.key, 0.0, False, f"invalid JSON: {err}")
        errors = list(self._validator.iter_errors(data))
        if not errors:
            return Result(self.key, 1.0, True, "valid against the schema")
        best = self._best_match(errors)
        listed = [
            {"path": "/" + "/".join(str(p) for p in e.absolute_path), "message": e.message}
            for e in errors[: self.params.max_errors]
        ]
        return Result(self.key, 0.0, False, best.message if best else errors[0].message, {"errors": listed})
