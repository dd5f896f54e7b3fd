"""assay.stats against scipy, statsmodels and scikit-learn on the same data (seeded)."""

from __future__ import annotations

import random

import pytest

from assay import stats as S
from tests.support.lazy import LazyModule

# the reference libraries are imported by the tests that use them (seconds of every worker's collection)
scipy_stats = LazyModule("scipy.stats")
sm = LazyModule("statsmodels.api")
smprop = LazyModule("statsmodels.stats.proportion")
smtables = LazyModule("statsmodels.stats.contingency_tables")
smmulti = LazyModule("statsmodels.stats.multitest")
skm = LazyModule("sklearn.metrics")
np = pytest.importorskip("numpy")

# closed forms agree far beyond the 3 decimals asked
CLOSE = 1e-6


def _scores(rng: random.Random, n: int) -> list[float]:
    return [min(1.0, max(0.0, rng.gauss(0.7, 0.25))) for _ in range(n)]


@pytest.mark.parametrize(("k", "n"), [(0, 10), (10, 10), (1, 2), (45, 50), (317, 1000), (3, 7), (999, 1000)])
@pytest.mark.parametrize("level", [0.95, 0.9, 0.99])
def test_wilson_matches_statsmodels(k: int, n: int, level: float) -> None:
    lo, hi = S.wilson_interval(k, n, level)
    ref = smprop.proportion_confint(k, n, alpha=1 - level, method="wilson")
    assert lo == pytest.approx(ref[0], abs=CLOSE)
    assert hi == pytest.approx(ref[1], abs=CLOSE)


@pytest.mark.parametrize("df", [1, 1.5, 2, 5, 29, 100, 1999, 2500, 10_000, 1_000_000])
@pytest.mark.parametrize("p", [0.5, 0.5000001, 0.9, 0.975, 0.995, 0.9999, 0.025])
def test_t_quantile_matches_scipy(df: int, p: float) -> None:
    assert S.t_ppf(p, df) == pytest.approx(scipy_stats.t.ppf(p, df), abs=1e-8)
    assert S.t_cdf(1.7, df) == pytest.approx(scipy_stats.t.cdf(1.7, df), abs=1e-8)


@pytest.mark.parametrize(("k", "n"), [(0, 1), (3, 20), (10, 20), (40, 101), (1200, 2500), (3000, 6100)])
def test_binomial_tail_matches_scipy(k: int, n: int) -> None:
    assert S.binom_cdf(k, n) == pytest.approx(scipy_stats.binom.cdf(k, n, 0.5), rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("seed", range(5))
def test_mean_interval_matches_scipy_t(seed: int) -> None:
    rng = random.Random(seed)
    xs = _scores(rng, rng.randint(3, 400))
    m = S.Moments()
    for x in xs:
        m.add(x, x >= 0.5)
    lo, hi = m.mean_interval(0.95)  # type: ignore[misc]
    ref = scipy_stats.t.interval(0.95, len(xs) - 1, loc=np.mean(xs), scale=scipy_stats.sem(xs))
    assert (lo, hi) == pytest.approx(ref, abs=CLOSE)
    plo, phi = m.pass_rate_interval(0.95)  # type: ignore[misc]
    passed = sum(x >= 0.5 for x in xs)
    assert (plo, phi) == pytest.approx(smprop.proportion_confint(passed, len(xs), method="wilson"), abs=CLOSE)


def _statsmodels_interval(xs: list[float], weights: list[float] | None, groups: list[int] | None) -> tuple[float, ...]:
    exog = np.ones((len(xs), 1))
    model = sm.WLS(np.asarray(xs), exog, weights=np.asarray(weights)) if weights else sm.OLS(np.asarray(xs), exog)
    if groups is None:
        fit = model.fit(cov_type="HC1", use_t=True)
    else:
        fit = model.fit(cov_type="cluster", cov_kwds={"groups": np.asarray(groups)}, use_t=True)
    return tuple(fit.conf_int(alpha=0.05)[0])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("weighted", [False, True])
def test_cluster_robust_interval_matches_statsmodels(seed: int, weighted: bool) -> None:
    rng = random.Random(seed)
    n_sessions = rng.randint(5, 40)
    xs, groups, weights = [], [], []
    for g in range(n_sessions):
        level = rng.random()
        for _ in range(rng.randint(1, 8)):
            xs.append(min(1.0, max(0.0, rng.gauss(level, 0.1))))
            groups.append(g)
            weights.append(rng.choice([1.0, 2.0, 5.0]) if weighted else 1.0)
    m = S.Moments()
    for x, g, w in zip(xs, groups, weights, strict=True):
        m.add(x, x >= 0.5, w, cluster=f"s{g}")
    ref = _statsmodels_interval(xs, weights if weighted else None, groups)
    assert m.mean_interval(0.95) == pytest.approx(ref, abs=CLOSE)


@pytest.mark.parametrize("seed", range(4))
def test_weighted_interval_matches_statsmodels_hc1(seed: int) -> None:
    rng = random.Random(seed)
    xs = _scores(rng, 120)
    ws = [rng.choice([1.0, 4.0, 10.0]) for _ in xs]
    m = S.Moments()
    for x, w in zip(xs, ws, strict=True):
        m.add(x, x >= 0.5, w)
    assert m.mean == pytest.approx(np.average(xs, weights=ws), abs=1e-12)
    assert m.mean_interval(0.95) == pytest.approx(_statsmodels_interval(xs, ws, None), abs=CLOSE)
    # pass rate: Wilson on the effective sample size; its width matches the sandwich variance
    p = m.pass_rate
    passes = [1.0 if x >= 0.5 else 0.0 for x in xs]
    lo, hi = _statsmodels_interval(passes, ws, None)
    se = (hi - lo) / 2 / scipy_stats.t.ppf(0.975, len(xs) - 1)
    n_eff = m.effective_n()
    assert p is not None and n_eff is not None
    assert n_eff == pytest.approx(p * (1 - p) / se**2, rel=1e-9)
    assert m.pass_rate_interval() == pytest.approx(smprop.proportion_confint(p * n_eff, n_eff, method="wilson"))


def test_unit_weights_and_singleton_clusters_give_the_plain_interval() -> None:
    rng = random.Random(7)
    xs = _scores(rng, 50)
    plain, weighted = S.Moments(), S.Moments()
    for x in xs:
        plain.add(x, x >= 0.5)
        weighted.add(x, x >= 0.5, 1.0)
    assert plain.mean_interval() == weighted.mean_interval()
    assert not weighted.weighted


@pytest.mark.parametrize(("b", "c"), [(0, 0), (1, 0), (12, 3), (3, 12), (40, 25), (7, 7), (150, 90), (900, 1000)])
def test_mcnemar_matches_statsmodels(b: int, c: int) -> None:
    ref = smtables.mcnemar([[50, b], [c, 50]], exact=True).pvalue
    assert S.mcnemar_exact(b, c) == pytest.approx(ref, abs=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_holm_matches_statsmodels(seed: int) -> None:
    rng = random.Random(seed)
    ps = [rng.random() ** 3 for _ in range(rng.randint(1, 12))]
    ref = smmulti.multipletests(ps, method="holm")[1]
    assert S.holm(ps) == pytest.approx(list(ref), abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_wilcoxon_matches_scipy(seed: int) -> None:
    rng = random.Random(seed)
    exact = [rng.gauss(0.1, 1.0) for _ in range(rng.randint(5, 40))]  # no ties, no zeros: exact
    assert S.wilcoxon_signed_rank(exact) == pytest.approx(scipy_stats.wilcoxon(exact).pvalue, abs=1e-9)
    # judge scores are discrete: ties and zeros, the normal approximation with tie correction
    tied = [rng.choice([-1.0, -0.5, 0.0, 0.0, 0.5, 1.0, 1.0]) for _ in range(rng.randint(60, 300))]
    ref = scipy_stats.wilcoxon(tied, method="asymptotic").pvalue
    assert S.wilcoxon_signed_rank(tied) == pytest.approx(ref, abs=1e-9)
    # a few pairs with ties and zeros: scipy's default is exact over every sign assignment
    few = [rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0, 1.0]) for _ in range(rng.randint(3, 13))]
    few[0] = 0.5  # not all zero
    assert S.wilcoxon_signed_rank(few) == pytest.approx(scipy_stats.wilcoxon(few).pvalue, abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("method", ["bca", "percentile"])
def test_bootstrap_interval_matches_scipy(seed: int, method: str) -> None:
    rng = random.Random(seed)
    xs = [rng.expovariate(3.0) for _ in range(rng.randint(40, 200))]  # skewed: BCa differs from percentile
    ours = S.bootstrap_mean_interval(xs, 0.95, resamples=9999, seed=seed, method=method)  # type: ignore[arg-type]
    ref = scipy_stats.bootstrap(
        (np.asarray(xs),), np.mean, n_resamples=9999, method="BCa" if method == "bca" else "percentile", rng=seed
    ).confidence_interval
    width = ref.high - ref.low
    # two independent Monte Carlo runs: agree to a few percent of the interval's width
    assert ours[0] == pytest.approx(ref.low, abs=0.04 * width)
    assert ours[1] == pytest.approx(ref.high, abs=0.04 * width)


def test_bootstrap_is_seeded() -> None:
    rng = random.Random(0)
    xs = [rng.random() for _ in range(30)]
    assert S.bootstrap_mean_interval(xs, seed=3) == S.bootstrap_mean_interval(xs, seed=3)
    assert S.bootstrap_mean_interval(xs, seed=3) != S.bootstrap_mean_interval(xs, seed=4)


@pytest.mark.parametrize("seed", range(5))
def test_kappa_and_confusion_matrix_match_sklearn(seed: int) -> None:
    rng = random.Random(seed)
    labels = ["pass", "fail", "partial"][: rng.randint(2, 3)]
    human = [rng.choice(labels) for _ in range(200)]
    judge = [h if rng.random() < 0.7 else rng.choice(labels) for h in human]
    got_labels, matrix = S.confusion_matrix(human, judge)
    assert matrix == skm.confusion_matrix(human, judge, labels=got_labels).tolist()
    assert S.cohen_kappa(human, judge) == pytest.approx(skm.cohen_kappa_score(human, judge), abs=1e-12)


def test_kappa_undefined_when_both_raters_are_constant() -> None:
    assert S.cohen_kappa(["a", "a"], ["a", "a"]) is None


@pytest.mark.parametrize("seed", range(4))
def test_spearman_and_mae_match_scipy_and_sklearn(seed: int) -> None:
    rng = random.Random(seed)
    human = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) for _ in range(150)]
    judge = [min(1.0, max(0.0, h + rng.gauss(0, 0.2))) for h in human]
    assert S.spearman(human, judge) == pytest.approx(scipy_stats.spearmanr(human, judge).statistic, abs=1e-12)
    assert S.mean_absolute_error(human, judge) == pytest.approx(skm.mean_absolute_error(human, judge), abs=1e-12)


def test_importing_assay_stats_imports_no_scipy() -> None:
    import subprocess
    import sys

    code = "import sys, assay, assay.stats; print([m for m in ('scipy', 'numpy', 'statsmodels') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_public_surface() -> None:
    for name in S.__all__:
        assert hasattr(S, name), name
    assert sorted(S.__all__, key=lambda n: (not n[0].isupper(), n)) == S.__all__
