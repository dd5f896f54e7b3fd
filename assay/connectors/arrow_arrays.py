"""Arrow arrays and scalars made from numpy arrays and Python strings without ``pa.array``.

``pa.array`` and ``pa.scalar`` (and every ``pyarrow.compute`` call given a Python value, which
converts it with ``pa.scalar``) ask pyarrow's pandas shim whether the value is a pandas object,
and the shim imports pandas to find out: ~0.3 s of CPU and ~40 MB of memory on the first call of
a run that never needs pandas (the columnar engine's runs are short: at 10^5 rows that was a fifth
of the run). These helpers build the same arrays from buffers (``pa.Array.from_buffers`` over the
numpy data, bit-packed booleans and validity), which never reach the shim.

>>> from_numpy(np.array([1.5, 2.0]), mask=np.array([False, True])).to_pylist()
[1.5, None]
>>> strings(["a", None, "é"]).to_pylist()
['a', None, 'é']
>>> text_scalar("x").as_py(), float_scalar(0.5).as_py()
('x', 0.5)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

_TYPES: dict[str, pa.DataType] = {
    "bool": pa.bool_(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
}


def _bits(flags: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(flags, bitorder="little"))


def from_numpy(values: np.ndarray, type: pa.DataType | None = None, mask: np.ndarray | None = None) -> pa.Array:
    """``pa.array(values, type, mask=mask)`` for a 1-d numpy array of booleans or numbers (``mask``:
    True where the value is null); ``type`` other than the array's own is a cast."""
    values = np.ascontiguousarray(values)
    own = _TYPES.get(values.dtype.name)
    if own is None or values.ndim != 1:
        raise TypeError(f"from_numpy: a 1-d array of booleans or numbers, not {values.dtype} x {values.ndim}")
    n = len(values)
    validity = None
    nulls = 0
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        nulls = int(mask.sum())
        if nulls:
            validity = _bits(~mask)
    data = _bits(values) if own == pa.bool_() else pa.py_buffer(values)
    arr = pa.Array.from_buffers(own, n, [validity, data], null_count=nulls)
    return arr if type is None or type == own else arr.cast(type)


def strings(values: Sequence[str | None]) -> pa.StringArray:
    """``pa.array(values, pa.string())`` for Python strings and Nones."""
    n = len(values)
    encoded = [b"" if v is None else v.encode() for v in values]
    offsets = np.zeros(n + 1, dtype=np.int64)
    if n:
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=n), out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError("strings: more than 2 GiB of text in one array")
    missing = [v is None for v in values]
    nulls = sum(missing)
    validity = _bits(~np.array(missing, dtype=bool)) if nulls else None
    buffers = [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))]
    arr: pa.StringArray = pa.Array.from_buffers(pa.string(), n, buffers, null_count=nulls)
    return arr


_DTYPES = {str(t): np.dtype(name) for name, t in _TYPES.items() if name != "bool"}


def to_numpy(arr: pa.Array | pa.ChunkedArray, dtype: type | np.dtype | None = None) -> np.ndarray:
    """``np.asarray(arr, dtype)`` for an Arrow array of booleans or numbers without nulls (a
    read-only view of numbers; ``Array.to_numpy`` imports pandas on its first call)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count:
        raise ValueError("to_numpy: the array has nulls (fill them first)")
    n, at = len(arr), arr.offset
    t = arr.type
    data = arr.buffers()[1]
    if t == pa.bool_():
        if data is None or not n:
            out = np.zeros(n, dtype=bool)
        else:
            bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8), count=at + n, bitorder="little")
            out = bits[at:].view(bool)
    else:
        own = _DTYPES.get(str(t))
        if own is None:
            raise TypeError(f"to_numpy: an array of booleans or numbers, not {t}")
        out = np.frombuffer(data, dtype=own, count=n, offset=at * own.itemsize) if n else np.zeros(0, dtype=own)
    return out if dtype is None else np.asarray(out, dtype=dtype)


def text_scalar(value: str | None) -> pa.Scalar:
    """``pa.scalar(value, pa.string())`` (None: a null string)."""
    return strings([value])[0]


def float_scalar(value: float) -> pa.Scalar:
    """``pa.scalar(value, pa.float64())``."""
    return from_numpy(np.array([value], dtype=np.float64))[0]


def bool_scalar(value: bool) -> pa.Scalar:
    """``pa.scalar(value, pa.bool_())``."""
    return from_numpy(np.array([value], dtype=bool))[0]


def int_scalar(value: int, type: pa.DataType | None = None) -> pa.Scalar:
    """``pa.scalar(value, type)`` (default ``pa.int64()``)."""
    return from_numpy(np.array([value], dtype=np.int64), type)[0]


__all__ = ["bool_scalar", "float_scalar", "from_numpy", "int_scalar", "strings", "text_scalar", "to_numpy"]
