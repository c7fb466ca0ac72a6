"""A/B runs as a picture, one row of panels per case and metric: values by run index per arm with the
two runs of each pair joined (drift, outliers, failures at a glance), and the per-pair B - A.

matplotlib is optional (the `plot` extra) and imported only here, with the Agg backend so no
display is needed.
"""
from __future__ import annotations

from pathlib import Path

from strata_bench.errors import InputError
from strata_bench.files import write_problem

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
    from strata_bench.results.load import load

    if out is not None and not str(out):  # Path("") is ".": the default name beside the input, unasked
        raise InputError("plot: cannot write '': the path is empty")
    loaded = load(path)
    if loaded.kind != "ab":
        raise InputError(f"plot draws A/B results; {loaded.path.name} is a {loaded.kind!r} file")
    outcomes = outcomes_from_records(loaded.records)
    if not outcomes:
        raise InputError(f"{loaded.path} holds no A/B runs")
    target = Path(out) if out is not None else loaded.path.with_suffix(".png")
    plt = _pyplot()
    _check_target(target, plt)
    panels = [(o, m) for o in outcomes for m in (o.metrics or (None,))]
    fig, axes = plt.subplots(len(panels), 2, figsize=(12, 3.6 * len(panels)), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2]})
    for (outcome, metric), (runs_ax, diff_ax) in zip(panels, axes):
        view = MetricView(outcome, metric)
        draw_runs(runs_ax, view)
        draw_diffs(diff_ax, view)
    fig.tight_layout()
    try:
        fig.savefig(target, dpi=110)
    except OSError as exc:  # a name too long for the file system, a folder without write permission
        raise InputError(f"plot: cannot write {target}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    return target


def _check_target(target: Path, plt) -> None:
    """InputError before anything is drawn: the image type must be one matplotlib writes, and its folder
    must be there (a folder is never made for it: a typo would scatter images)."""
    types = plt.figure().canvas.get_supported_filetypes()
    plt.close("all")
    kind = target.suffix.lower().lstrip(".")
    if kind not in types:
        raise InputError(f"plot: cannot write {target}: {target.suffix or 'no extension'} is not an image type "
                         f"matplotlib writes ({', '.join(sorted(types))})")
    why = write_problem(target)
    if why is not None:
        raise InputError(f"plot: cannot write {target}: {why}")


class MetricView:
    """One metric of one outcome as the panels need it: each run's figure, the comparison, the labels."""

    def __init__(self, outcome, metric=None) -> None:
        self.outcome = outcome
        self.several = len(outcome.metrics) > 1 or bool(outcome.plan.params)
        self.name = metric.name if metric is not None else outcome.plan.metric
        self.comparison = metric.comparison if metric is not None else outcome.comparison
        self.excluded = metric.excluded_pairs if metric is not None else outcome.excluded_pairs
        self.keyed = metric is not None and any(r.metrics for r in outcome.runs)
        # The statistics drawn beside the runs are in the unit shown (--unit applied): so are the runs.
        self.factor, self.unit = outcome.plan.shown(self.name if self.keyed else None)

    def figure(self, r):
        if not r.ok:
            return None
        raw = r.metrics.get(self.name) if self.keyed else r.value
        return None if raw is None else raw * self.factor

    @property
    def title(self) -> str:
        plan = self.outcome.plan
        head = f"{self.outcome.case} / {self.name}" if self.several else self.outcome.case
        return f"{head}: {self.comparison.verdict.value} ({plan.order}, {plan.pairs} pairs)"

    @property
    def label(self) -> str:
        return f"{self.name} ({self.unit})" if self.unit else self.name


def draw_runs(ax, view: MetricView) -> None:
    """Each arm's values against run index, each pair's two runs joined by a grey line; warm-ups hollow,
    outliers circled, failures as red x."""
    runs = [r for r in view.outcome.runs if view.figure(r) is not None]
    by_pair: dict[int, list] = {}
    for r in runs:
        if not r.warmup:
            by_pair.setdefault(r.pair, []).append(r)
    for pair in by_pair.values():
        if len(pair) == 2:
            ax.plot([r.run_index for r in pair], [view.figure(r) for r in pair], color="0.6", linewidth=0.8,
                    zorder=1)
    for label, (color, marker) in ARM_STYLE.items():
        mine = [r for r in runs if r.arm == label]
        measured = [r for r in mine if not r.warmup]
        ax.scatter([r.run_index for r in measured], [view.figure(r) for r in measured], marker=marker, color=color,
                   label=label, zorder=2)
        warm = [r for r in mine if r.warmup]
        if warm:
            ax.scatter([r.run_index for r in warm], [view.figure(r) for r in warm], marker=marker,
                       facecolors="none", edgecolors=color, label=f"{label} warm-up")
    outliers = _outlier_runs(view)
    if outliers:
        ax.scatter([r.run_index for r in outliers], [view.figure(r) for r in outliers], s=160, facecolors="none",
                   edgecolors="black", label="outlier (kept)")
    failed = view.outcome.failures
    if failed:
        floor = min(view.figure(r) for r in runs) if runs else 0.0
        ax.scatter([r.run_index for r in failed], [floor] * len(failed), marker="x", color="red", s=60,
                   label="failed run", zorder=3)
    ax.set_xlabel("run index (execution order); grey lines join the two runs of a pair")
    ax.set_ylabel(view.label)
    ax.set_title(view.title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")


def draw_diffs(ax, view: MetricView) -> None:
    """B - A per complete pair, with the mean and its 95% t interval."""
    pairs: dict[int, dict[str, float]] = {}
    for r in view.outcome.runs:
        if view.figure(r) is not None and not r.warmup:
            pairs.setdefault(r.pair, {})[r.arm] = view.figure(r)
    complete = sorted(p for p, arms in pairs.items() if len(arms) == 2 and p not in view.excluded)
    diffs = [pairs[p]["B"] - pairs[p]["A"] for p in complete]
    ax.axhline(0.0, color="gray", linewidth=0.8)
    ax.plot(complete, diffs, marker="o", color="tab:green", linewidth=0.6)
    paired = view.comparison.paired
    if paired is not None:
        ax.axhline(paired.mean_diff, color="tab:green", linestyle="--", linewidth=0.8, label="mean B - A")
        if paired.ci_t is not None:
            ax.axhspan(paired.ci_t.low, paired.ci_t.high, color="tab:green", alpha=0.15, label="95% CI (t)")
        ax.legend(fontsize="small")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("pair")
    ax.set_ylabel(f"B - A ({view.unit})" if view.unit else "B - A")
    ax.set_title("paired differences")
    ax.grid(alpha=0.3)


def _outlier_runs(view: MetricView):
    out = []
    for label, arm in (("A", view.comparison.a), ("B", view.comparison.b)):
        measured = [r for r in view.outcome.runs if r.arm == label and not r.warmup and view.figure(r) is not None]
        out += [measured[i] for i in arm.outliers if i < len(measured)]
    return out
