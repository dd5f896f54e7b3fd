"""Unpaired comparison of two runs (no shared traces) against scipy and statsmodels (seeded data)."""

from __future__ import annotations

import random

import pytest

from assay import stats as S

scipy_stats = pytest.importorskip("scipy.stats")
smprop = pytest.importorskip("statsmodels.stats.proportion")
np = pytest.importorskip("numpy")


def _moments(scores: list[float], threshold: float = 0.5) -> S.Moments:
    m = S.Moments()
    for x in scores:
        m.add(x, x >= threshold)
    return m


def _scores(rng: random.Random, n: int, mu: float, sd: float) -> list[float]:
    return [min(1.0, max(0.0, rng.gauss(mu, sd))) for _ in range(n)]


@pytest.mark.parametrize(
    ("n1", "n2", "mu1", "mu2", "sd2"), [(40, 300, 0.7, 0.65, 0.1), (500, 450, 0.6, 0.6, 0.3), (3, 9, 0.5, 0.8, 0.2)]
)
@pytest.mark.parametrize("level", [0.95, 0.9])
def test_welch_matches_scipy(n1: int, n2: int, mu1: float, mu2: float, sd2: float, level: float) -> None:
    rng = random.Random(n1 * 7 + n2)
    a, b = _scores(rng, n1, mu1, 0.25), _scores(rng, n2, mu2, sd2)
    d = S.welch_difference(_moments(a), _moments(b), level)
    ref = scipy_stats.ttest_ind(b, a, equal_var=False)
    ci = ref.confidence_interval(confidence_level=level)
    assert d is not None and d.method == "Welch t-test"
    assert d.delta == pytest.approx(float(np.mean(b) - np.mean(a)), abs=1e-12)
    assert d.p_value == pytest.approx(ref.pvalue, rel=1e-6, abs=1e-12)
    assert d.interval is not None
    assert d.interval[0] == pytest.approx(ci.low, abs=1e-8) and d.interval[1] == pytest.approx(ci.high, abs=1e-8)


@pytest.mark.parametrize(
    ("x1", "n1", "x2", "n2"), [(56, 70, 48, 80), (9, 10, 3, 10), (300, 1000, 350, 1200), (0, 20, 2, 25)]
)
def test_two_proportion_test_matches_scipy_and_newcombe_matches_statsmodels(x1: int, n1: int, x2: int, n2: int) -> None:
    a = _moments([1.0] * x1 + [0.0] * (n1 - x1))
    b = _moments([1.0] * x2 + [0.0] * (n2 - x2))
    d = S.two_proportion_difference(a, b)
    assert d is not None and d.method == "two-proportion z-test" and d.interval_method == "Newcombe"
    assert d.delta == pytest.approx(x2 / n2 - x1 / n1, abs=1e-12)
    table = [[x1, n1 - x1], [x2, n2 - x2]]
    chi2 = scipy_stats.chi2_contingency(table, correction=False)  # the same test as the pooled z-test
    assert d.p_value == pytest.approx(chi2.pvalue, rel=1e-6, abs=1e-12)
    lo, hi = smprop.confint_proportions_2indep(x2, n2, x1, n1, method="newcomb", compare="diff")
    assert d.interval is not None
    assert d.interval[0] == pytest.approx(lo, abs=1e-6) and d.interval[1] == pytest.approx(hi, abs=1e-6)


def test_newcombe_published_example() -> None:
    """Newcombe (1998), Table II, example (a): 56/70 vs 48/80, method 10: 0.0524 to 0.3339."""
    lo, hi = S.newcombe_interval(48, 80, 56, 70)
    assert (round(lo, 4), round(hi, 4)) == (0.0524, 0.3339)


def test_degenerate_samples() -> None:
    assert S.two_proportion_difference(S.Moments(), _moments([1.0])) is None
    same = S.two_proportion_difference(_moments([1.0] * 5), _moments([1.0] * 7))
    assert same is not None and same.p_value == 1.0 and same.delta == 0.0
    one = S.welch_difference(_moments([0.4]), _moments([0.5, 0.7]))
    assert one is not None and one.p_value is None and one.interval is None
