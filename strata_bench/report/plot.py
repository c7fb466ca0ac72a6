"""A/B runs as a picture: values by run index per arm (drift, outliers, failures at a glance).

matplotlib is optional (the `plot` extra) and imported only here, with the Agg backend so no
display is needed.
"""
from __future__ import annotations

from pathlib import Path

from strata_bench.errors import InputError

ARM_STYLE = {"A": ("tab:blue", "o"), "B": ("tab:orange", "s")}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise InputError("plot needs matplotlib: pip install 'strata-bench[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_file(path: str | Path, out: str | Path | None = None) -> Path:
    """Write a PNG of an A/B results file; returns its path."""
    from strata_bench.ab.store import outcomes_from_records
    from strata_bench.report.load import load

    loaded = load(path)
    if loaded.kind != "ab":
        raise InputError(f"plot draws A/B results; {loaded.path.name} is a {loaded.kind!r} file")
    outcomes = outcomes_from_records(loaded.records)
    if not outcomes:
        raise InputError(f"{loaded.path} holds no A/B runs")
    target = Path(out) if out else loaded.path.with_suffix(".png")
    plt = _pyplot()
    fig, axes = plt.subplots(len(outcomes), 2, figsize=(12, 3.6 * len(outcomes)), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2]})
    for outcome, (runs_ax, diff_ax) in zip(outcomes, axes):
        draw_runs(runs_ax, outcome)
        draw_diffs(diff_ax, outcome)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    plt.close(fig)
    return target


def _unit_label(outcome) -> str:
    unit = outcome.plan.unit
    return f"{outcome.plan.metric} ({unit})" if unit else outcome.plan.metric


def draw_runs(ax, outcome) -> None:
    """Each arm's values against run index; warm-ups hollow, outliers circled, failures as red x."""
    outliers = _outlier_runs(outcome)
    values = [r.value for r in outcome.runs if r.ok]
    for label, (color, marker) in ARM_STYLE.items():
        runs = [r for r in outcome.runs if r.arm == label and r.ok]
        measured = [r for r in runs if not r.warmup]
        ax.plot([r.run_index for r in measured], [r.value for r in measured], marker=marker, color=color,
                linestyle="-", linewidth=0.6, label=label)
        warm = [r for r in runs if r.warmup]
        if warm:
            ax.scatter([r.run_index for r in warm], [r.value for r in warm], marker=marker,
                       facecolors="none", edgecolors=color, label=f"{label} warm-up")
    if outliers:
        ax.scatter([r.run_index for r in outliers], [r.value for r in outliers], s=160, facecolors="none",
                   edgecolors="black", label="outlier (kept)")
    failed = outcome.failures
    if failed:
        floor = min(values) if values else 0.0
        ax.scatter([r.run_index for r in failed], [floor] * len(failed), marker="x", color="red", s=60,
                   label="failed run", zorder=3)
    ax.set_xlabel("run index (execution order)")
    ax.set_ylabel(_unit_label(outcome))
    c = outcome.comparison
    ax.set_title(f"{outcome.case}: {c.verdict.value} ({outcome.plan.order}, {outcome.plan.pairs} pairs)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")


def draw_diffs(ax, outcome) -> None:
    """B - A per complete pair, with the mean and its 95% t interval."""
    pairs: dict[int, dict[str, float]] = {}
    for r in outcome.runs:
        if r.ok and not r.warmup:
            pairs.setdefault(r.pair, {})[r.arm] = r.value
    complete = sorted(p for p, arms in pairs.items() if len(arms) == 2 and p not in outcome.excluded_pairs)
    diffs = [pairs[p]["B"] - pairs[p]["A"] for p in complete]
    ax.axhline(0.0, color="gray", linewidth=0.8)
    ax.plot(complete, diffs, marker="o", color="tab:green", linewidth=0.6)
    paired = outcome.comparison.paired
    if paired is not None:
        ax.axhline(paired.mean_diff, color="tab:green", linestyle="--", linewidth=0.8, label="mean B - A")
        if paired.ci_t is not None:
            ax.axhspan(paired.ci_t.low, paired.ci_t.high, color="tab:green", alpha=0.15, label="95% CI (t)")
        ax.legend(fontsize="small")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("pair")
    ax.set_ylabel(f"B - A ({outcome.plan.unit})" if outcome.plan.unit else "B - A")
    ax.set_title("paired differences")
    ax.grid(alpha=0.3)


def _outlier_runs(outcome):
    out = []
    for label, arm in (("A", outcome.comparison.a), ("B", outcome.comparison.b)):
        measured = [r for r in outcome.runs if r.arm == label and not r.warmup and r.ok]
        out += [measured[i] for i in arm.outliers]
    return out
