"""Arrow arrays from numpy and Python strings without ``pa.array``: the same arrays as
``pa.array`` makes (values, nulls, types), numpy views of sliced arrays, and no pandas import."""

from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from assay.connectors.arrow_arrays import (
    bool_scalar,
    float_scalar,
    from_numpy,
    int_scalar,
    strings,
    text_scalar,
    to_numpy,
)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_from_numpy_equals_pa_array(seed: int) -> None:
    rnd = np.random.default_rng(seed)
    n = int(rnd.integers(0, 70))
    mask = rnd.random(n) < 0.3
    for values in (rnd.random(n), rnd.integers(-5, 5, n), rnd.random(n) < 0.5, rnd.integers(0, 9, n).astype(np.int32)):
        assert from_numpy(values).equals(pa.array(values))
        assert from_numpy(values, mask=mask).equals(pa.array(values, mask=mask))
        assert from_numpy(values, pa.float64(), mask=mask).equals(pa.array(values, pa.float64(), mask=mask))


def test_from_numpy_refuses_what_it_cannot_build() -> None:
    with pytest.raises(TypeError):
        from_numpy(np.array(["a"]))
    with pytest.raises(TypeError):
        from_numpy(np.zeros((2, 2)))


@pytest.mark.parametrize("seed", [0, 1])
def test_strings_equal_pa_array(seed: int) -> None:
    rnd = random.Random(seed)
    alphabet = ["a", "é", "ü", "日本", "🙂", "", " ", "\n"]
    values = [None if rnd.random() < 0.2 else "".join(rnd.choices(alphabet, k=rnd.randint(0, 6))) for _ in range(300)]
    assert strings(values).equals(pa.array(values, pa.string()))
    assert strings([]).equals(pa.array([], pa.string()))
    assert strings([None, None]).equals(pa.array([None, None], pa.string()))


def test_scalars() -> None:
    assert text_scalar("x") == pa.scalar("x", pa.string())
    assert float_scalar(0.5) == pa.scalar(0.5, pa.float64())
    assert int_scalar(-1) == pa.scalar(-1, pa.int64())
    assert int_scalar(3, pa.int32()) == pa.scalar(3, pa.int32())
    assert bool_scalar(False) == pa.scalar(False, pa.bool_())


def test_to_numpy_of_sliced_arrays_and_offsets() -> None:
    nums = pa.array(np.arange(20, dtype=np.int64)).slice(3, 9)
    assert to_numpy(nums).tolist() == list(range(3, 12))
    flags = pa.array([i % 3 == 0 for i in range(21)]).slice(5, 11)
    assert to_numpy(flags).tolist() == [i % 3 == 0 for i in range(5, 16)]
    lists = pa.array([[1], [2, 3], [], [4, 5, 6]]).slice(1, 3)
    assert to_numpy(lists.offsets, np.int64).tolist() == lists.offsets.to_pylist()
    assert to_numpy(pa.chunked_array([[1.5], [2.5]])).tolist() == [1.5, 2.5]
    assert to_numpy(pa.array([], pa.bool_())).tolist() == []
    with pytest.raises(ValueError, match="nulls"):
        to_numpy(pa.array([1, None]))


def test_none_of_them_imports_pandas() -> None:
    code = (
        "import sys, numpy as np, pyarrow as pa\n"
        "from assay.connectors.arrow_arrays import *\n"
        "a = from_numpy(np.arange(5), mask=np.arange(5) > 2); s = strings(['x', None])\n"
        "to_numpy(a.fill_null(int_scalar(0))); to_numpy(s.is_valid()); text_scalar('t'); float_scalar(1.0)\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
