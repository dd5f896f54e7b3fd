"""A p-value that underflows is written ``p<1e-300``, never ``p=0``: in the stats helpers and in the
regression line of ``assay compare``."""

from __future__ import annotations

from assay.report.compare_command import _why
from assay.report.paired import PairedKey
from assay.stats import PairedDelta, mcnemar_exact
from assay.stats.pvalues import format_p, p_text


def test_an_underflowed_p_is_below_the_floor_not_zero() -> None:
    p = mcnemar_exact(2000, 0)  # 2 * 0.5**2000: 0.0 in a double
    assert p < 1e-300
    assert (format_p(p), p_text(p)) == ("<1e-300", "p<1e-300")
    assert (format_p(0.0123456), p_text(0.0123456), format_p(None)) == ("0.0123", "p=0.0123", "-")
    assert format_p(1e-300) == "1e-300"


def test_the_regression_line_of_compare_says_p_below_the_floor() -> None:
    key = PairedKey(
        key="correctness",
        n=2000,
        pass_rate_delta=PairedDelta(n=2000, delta=-1.0, interval=None, method="t"),
        p_value_holm=mcnemar_exact(2000, 0),
    )
    assert _why(key) == "pass rate -1.000, McNemar p<1e-300 Holm"
