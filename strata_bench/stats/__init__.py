"""Statistics for A/B runs and result comparisons, on plain sequences of floats (scipy where it has the test).

criteria (how to judge), intervals (t, Welch, bootstrap), samples (one arm, outliers), paired (B - A,
Wilcoxon, dominance), drift (trends over run order), verdict (SAME/FASTER/SLOWER/UNDECIDED and why).
Their text forms are in strata_bench.stats.format. Import from the modules: this file stays empty so
that `stats.criteria` loads without scipy.
"""
