"""Tool-call arguments as integer codes: equal codes exactly when the object path's ``exact``
matcher (``out_args == ref_args``, Python equality of the parsed JSON) says equal.

Each distinct argument text of a batch is parsed once, as ``parse_args`` reads it (null or ``""``:
``{}``; a JSON object: itself; anything else is a defect, which the object path scores with a
warning row, so such rows fall back). Its canonical form is its JSON with sorted keys after the
two rewrites that make Python's equality textual: a boolean becomes its integer (``True == 1``)
and a float with an integral value becomes an integer (``1.0 == 1``); other floats keep their
shortest repr, which is equal exactly when the floats are. A value orjson cannot write back (an
integer beyond 64 bits) is a defect too (the row falls back), never a guess.

>>> canonical({"b": [1.0, True], "a": {"y": 2.5, "x": "s"}})
b'{"a":{"x":"s","y":2.5},"b":[1,1]}'
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from assay.connectors.arrow_arrays import strings, to_numpy

_SORT = orjson.OPT_SORT_KEYS
_SUSPECT = (b".", b"e", b"E", b"true", b"false")


def _plain(value: Any) -> Any:
    t = type(value)
    if t is bool:
        return int(value)
    if t is float:
        return int(value) if value.is_integer() else value
    if t is dict:
        return {k: _plain(v) for k, v in value.items()}
    if t is list:
        return [_plain(v) for v in value]
    return value


def canonical(value: Any) -> bytes:
    """The canonical JSON of a parsed value (raises ``TypeError`` when orjson cannot write it)."""
    text = orjson.dumps(value, option=_SORT)
    if any(s in text for s in _SUSPECT):  # a float or a boolean may be inside: rewrite, then write
        text = orjson.dumps(_plain(value), option=_SORT)
    return text


def canonical_or_none(raw: Any) -> bytes | None:
    """The canonical JSON of one argument text as ``parse_args`` reads it, None for a defect."""
    if raw is None or raw == "":
        return b"{}"
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(parsed) is not dict:
        return None
    try:
        return canonical(parsed)
    except (TypeError, orjson.JSONEncodeError):
        return None


def argument_codes(arrays: list[pa.Array]) -> tuple[list[np.ndarray], list[np.ndarray], dict[bytes, int]]:
    """Codes of the argument texts of several arrays (one dictionary), per array a mask of the
    defective ones (see the module docstring), and the canonical texts' codes."""
    plain = [a.cast(pa.string()) if pa.types.is_dictionary(a.type) or pa.types.is_null(a.type) else a for a in arrays]
    joined = pa.concat_arrays([p.cast(pa.string()) for p in plain]) if plain else strings([])
    enc = pc.dictionary_encode(joined, null_encoding="encode")
    texts = enc.dictionary.to_pylist()
    canon: dict[bytes, int] = {}
    code_of_text = np.empty(len(texts), dtype=np.int64)
    for i, raw in enumerate(texts):
        c = canonical_or_none(raw)
        code_of_text[i] = -1 if c is None else canon.setdefault(c, len(canon))
    idx = to_numpy(enc.indices, np.int64)
    codes = code_of_text[idx] if len(idx) else np.zeros(0, dtype=np.int64)
    out_codes: list[np.ndarray] = []
    defects: list[np.ndarray] = []
    start = 0
    for p in plain:
        part = codes[start : start + len(p)]
        start += len(p)
        bad = part < 0
        out_codes.append(np.where(bad, 0, part))
        defects.append(bad)
    return out_codes, defects, canon
