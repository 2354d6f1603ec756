"""Statistics of a session, with no pytest in them: summaries, intervals, tests.

- :mod:`.core` — summaries, bootstrap intervals, paired tests, corrections, power,
  prediction-powered inference.
- :mod:`.intervals` — the interval of a report cell, chosen from its data, and the
  bound its gate checks.

The public names (``from pytest_ragbench.stats import bootstrap_ci``) are re-exported
here.
"""

from pytest_ragbench.stats.core import (
    EFFECT_SIZES,
    TIE_TOLERANCE,
    CIMethod,
    Interval,
    PairedTest,
    PairedTestName,
    PPIInterval,
    PPIMethod,
    Scores,
    Stratum,
    Summary,
    adjust_pvalues,
    batch_bootstrap_ci,
    bootstrap_ci,
    cohens_d,
    paired_power,
    paired_test,
    power_table,
    ppi_mean_ci,
    proportion_half_width,
    sample_size_for_half_width,
    stratified_ppi_mean_ci,
    summarize,
    t_ci,
)

__all__ = [
    "EFFECT_SIZES",
    "TIE_TOLERANCE",
    "CIMethod",
    "Interval",
    "PPIInterval",
    "PPIMethod",
    "PairedTest",
    "PairedTestName",
    "Scores",
    "Stratum",
    "Summary",
    "adjust_pvalues",
    "batch_bootstrap_ci",
    "bootstrap_ci",
    "cohens_d",
    "paired_power",
    "paired_test",
    "power_table",
    "ppi_mean_ci",
    "proportion_half_width",
    "sample_size_for_half_width",
    "stratified_ppi_mean_ci",
    "summarize",
    "t_ci",
]
