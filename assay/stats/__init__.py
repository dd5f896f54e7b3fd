"""Statistics for decisions: intervals in every summary, paired comparison of two runs, a judge
against human labels. Pure Python (scipy is never imported); the accumulators are mergeable, so
shards and a merge give the same intervals as one run.

>>> from assay.stats import Moments, mcnemar_exact, wilson_interval
>>> [round(x, 3) for x in wilson_interval(9, 10)]
[0.596, 0.982]
"""

from assay.stats.agreement import cohen_kappa, confusion_matrix, mean_absolute_error, spearman
from assay.stats.calibration import CalibrationPairs, human_label, ppi_from_moments, self_consistency
from assay.stats.clusters import cluster_of
from assay.stats.distributions import betainc, binom_cdf, normal_cdf, normal_ppf, t_cdf, t_ppf
from assay.stats.intervals import bootstrap_mean_interval, percentile, t_interval, wilson_interval
from assay.stats.moments import Moments, sample_weight
from assay.stats.paired import PairedDelta, average_ranks, holm, mcnemar_exact, paired_delta, wilcoxon_signed_rank
from assay.stats.unpaired import UnpairedDelta, newcombe_interval, two_proportion_difference, welch_difference

__all__ = [
    "CalibrationPairs",
    "Moments",
    "PairedDelta",
    "UnpairedDelta",
    "average_ranks",
    "betainc",
    "binom_cdf",
    "bootstrap_mean_interval",
    "cluster_of",
    "cohen_kappa",
    "confusion_matrix",
    "holm",
    "human_label",
    "mcnemar_exact",
    "mean_absolute_error",
    "newcombe_interval",
    "normal_cdf",
    "normal_ppf",
    "paired_delta",
    "percentile",
    "ppi_from_moments",
    "sample_weight",
    "self_consistency",
    "spearman",
    "t_cdf",
    "t_interval",
    "t_ppf",
    "two_proportion_difference",
    "welch_difference",
    "wilcoxon_signed_rank",
    "wilson_interval",
]
