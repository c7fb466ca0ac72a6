"""The bench tables: per-variant detail, and the pull-request pivot (a row per call, a column per
column count, `old / new` us and the speedup). Input: bench records (dicts), so stored results render
the same way as a live run."""
from __future__ import annotations

import io
import json
from typing import Any, Iterable

import pandas as pd
from rich.console import Console
from rich.table import Table


def _call_name(rec: dict[str, Any], several_devices: bool = False) -> str:
    params = "".join(f"/{k}={v}" for k, v in sorted((rec.get("params") or {}).items()))
    device = f"device {rec.get('device')}: " if several_devices else ""
    return f"{device}{rec['family']}/{rec['format']}/{rec['rows']}x{rec['cols']}{params}"


def _several_devices(records: list[dict[str, Any]]) -> bool:
    """True when the records come from more than one device (a `--device all` run): rows then name it."""
    return len({r.get("device") for r in records}) > 1


def detail_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per variant (with a device column when the records come from several devices). Records
    that carry clocks and sensitivity (bench since issue 12) add the columns `clocks` (SM clock over the
    trials) and `sees>=%` (the smallest change against the baseline its data could detect); a fraction
    over 100% shows as ">100" (a flagged row, not a figure). `ceiling` names the one measured ceiling that
    bounds the family's kernels and `%ceiling` is the fraction of it (records before it was named: read);
    records with a measured cold check add `cache`: cold, WARM (flagged), cold (copy>L2) or hot."""
    records = list(records)
    several = _several_devices(records)
    newer = any("sensitivity" in r for r in records)
    profiled = any(r.get("profile") for r in records)
    rows = []
    for r in records:
        row = {"case": r["case"], **({"device": r.get("device")} if several else {}),
               "variant": r["variant"], "status": r["status"],
               "median_us": r.get("median_us"), "min_us": r.get("min_us"), "max_us": r.get("max_us"),
               "ci_%": None if r.get("ci_rel") is None else 100 * r["ci_rel"],
               "GB/s": r.get("gbps"), "ceiling": _bound(r), "%ceiling": _pct(_bound_fraction(r)),
               "TFLOP/s": r.get("tflops")}
        if "cold_check" in r:
            row["cache"] = _cache(r)
        if newer:
            row["clocks"] = _clocks(r.get("clocks"))
            row["sees>=%"] = _pct(r.get("sensitivity"))
        if profiled:
            row.update(profile_cells(r.get("profile")))
        rows.append(row)
    return pd.DataFrame(rows)


PROFILE_COLUMNS = ("inst/w", "DRAM/model", "issue%", "DRAM%", "binds")


def profile_cells(profile: dict | None) -> dict[str, Any]:
    """bench --profile's columns of a record (kernels/ncu.ProfileRow.to_record): instructions per weight, DRAM
    bytes over the byte model (`OFF` beyond 5%: the GB/s column then misreads the DRAM), the issue-slot and
    DRAM utilisation and the bound; every cell None for a blank or unprofiled row (the footer says why)."""
    if not profile or profile.get("blank"):
        return dict.fromkeys(PROFILE_COLUMNS)
    ratio = profile.get("bytes_ratio")
    bytes_cell = None if ratio is None else f"{ratio:.3f}" + (" OFF" if profile.get("bytes_off") else "")
    return dict(zip(PROFILE_COLUMNS, (profile.get("inst_per_weight"), bytes_cell, profile.get("issue_pct"),
                                      profile.get("dram_pct"), profile.get("bound"))))


def profile_blank_lines(records: Iterable[dict[str, Any]]) -> list[str]:
    """One line per reason that left profiled rows blank ('profile blank (3 rows): ncu not found ...')."""
    reasons: dict[str, int] = {}
    for r in records:
        blank = (r.get("profile") or {}).get("blank")
        if blank:
            reasons[blank] = reasons.get(blank, 0) + 1
    return [f"profile blank ({n} row{'s' if n > 1 else ''}): {reason}" for reason, n in reasons.items()]


def _bound(rec: dict[str, Any]) -> str | None:
    """The ceiling that bounds the record's kernel: its "bound", or read for records before it existed."""
    return rec["bound"] if "bound" in rec else "read"


def _bound_fraction(rec: dict[str, Any]) -> float | None:
    return rec.get("frac_bound") if "bound" in rec else rec.get("frac_read")


_CACHE = {"cold": "cold", "warm": "WARM", "cold: one copy exceeds the L2": "cold (copy>L2)"}


def _cache(rec: dict[str, Any]) -> str | None:
    """What the cold check measured (timing/coldness.py), in a word; hot for --hot, None when not timed."""
    check = rec.get("cold_check")
    if check:
        return _CACHE.get(check["verdict"], check["verdict"])
    return "hot" if (rec.get("rotation") or {}).get("hot") else None


def _pct(x):
    if x is None:
        return None
    return ">100" if x > 1 else 100 * x


def _clocks(clocks: dict | None) -> str | None:
    if not clocks:
        return None
    from strata_bench.timing.clocks import ClockSummary

    summary = ClockSummary.from_dict(clocks)
    return summary.text() + (" THROTTLED" if summary.throttled else "")


def footer_lines(records: Iterable[dict[str, Any]], ceilings: Iterable[str] = ()) -> list[str]:
    """Below the tables: the ceilings, why profiled rows are blank (once per reason), then each flagged variant
    (warm rotation, throttling, a ceiling beaten) and each case's sensitivity, once per case."""
    records = list(records)
    lines = [*ceilings, *profile_blank_lines(records)]
    seen: set[str] = set()
    for r in records:
        for flag in r.get("flags") or ():
            lines.append(f"flag: {r['case']} {r['variant']}: {flag}")
        if r["case"] not in seen and r.get("trials"):
            seen.add(r["case"])
            timed = [x for x in records if x["case"] == r["case"] and x.get("trials")]
            from strata_bench.timing.verify import sensitivity_text

            if "sensitivity" in r:
                lines.append(f"{r['case']}: " + sensitivity_text(
                    timed[-1].get("sensitivity") if timed[-1].get("sensitivity") is not None else float("nan"),
                    [x["trials"] for x in timed]))
    return lines


def pivot_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Rows: calls (per device when the records come from several); columns: n=<ncols>; cells:
    'old / new us (speedup)' for the first two variants."""
    records = list(records)
    several = _several_devices(records)
    by_call: dict[str, dict[int, dict[str, dict]]] = {}
    for r in records:
        by_call.setdefault(_call_name(r, several), {}).setdefault(int(r["ncols"]), {})[r["variant"]] = r
    table = {}
    for call, per_n in by_call.items():
        table[call] = {f"n={n}": _cell(v) for n, v in sorted(per_n.items())}
    return pd.DataFrame.from_dict(table, orient="index").fillna("")


def _cell(variants: dict[str, dict]) -> str:
    names = list(variants)
    bad = [v for v in variants.values() if v["status"] != "timed"]
    if bad:  # timed but rejected (timed output differs, impossible): never shown as a speedup
        return ("rejected: " if bad[0].get("trials") else "not timed: ") + bad[0]["status"]
    if len(names) < 2:
        v = variants[names[0]]
        return f"{v['median_us']:.2f} us"
    a, b = variants[names[0]], variants[names[1]]
    return (f"{a['median_us']:.2f} / {b['median_us']:.2f} us ({a['median_us'] / b['median_us']:.2f}x, "
            f"{b['gbps']:.0f} GB/s{_fraction_text(b)})")


def _fraction_text(rec: dict[str, Any]) -> str:
    """', 20% read' of the ceiling that bounds the kernel; '' where none does."""
    bound, frac = _bound(rec), _bound_fraction(rec)
    if bound is None or frac is None:
        return ""
    return f", >100% {bound}, flagged" if frac > 1 else f", {100 * frac:.0f}% {bound}"


def render(records: list[dict[str, Any]], output: str, ceilings: Iterable[str] = ()) -> str:
    """The pivot, the per-variant detail and the footer (`ceilings`: one line per device, then the
    flags and each case's sensitivity); JSON is the records as they are."""
    if output == "json":
        return json.dumps(records, indent=2, default=str)
    pivot = pivot_frame(records)
    detail = detail_frame(records)
    footer = footer_lines(records, ceilings)
    if output == "md":
        return ("Old / new per call (speedup, new's GB/s and fraction of the ceiling that bounds it)\n\n"
                + pivot.to_markdown() + "\n\n" + _mixed_rounded(detail).to_markdown(index=False, floatfmt=".2f")
                + ("\n\n" + "\n".join(f"- {line}" for line in footer) if footer else ""))
    buf = io.StringIO()
    console = Console(file=buf, width=200, force_terminal=False)
    console.print(_rich(pivot, "old / new per call", index=True))
    console.print(_rich(detail, "per variant", index=False))
    for line in footer:
        console.print(line, markup=False, highlight=False)
    return buf.getvalue().rstrip()


def _mixed_rounded(frame: pd.DataFrame) -> pd.DataFrame:
    """The figures of a column that also holds text (`%ceiling`: 29.95 beside ">100") as the table shows
    them: tabulate's floatfmt skips a column with any text, which then printed 29.95230584604026."""
    out = frame.copy()
    for col in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[col]):
            out[col] = frame[col].map(lambda v: _fmt(v) if isinstance(v, float) else v)
    return out


def _rich(frame: pd.DataFrame, title: str, index: bool) -> Table:
    table = Table(title=title)
    if index:
        table.add_column("call")
    for col in frame.columns:
        table.add_column(str(col), overflow="fold")
    for idx, row in frame.iterrows():
        cells = [_fmt(v) for v in row.tolist()]
        table.add_row(*([str(idx)] if index else []), *cells)
    return table


def _fmt(v) -> str:
    if isinstance(v, float):
        return "-" if v != v else f"{v:.2f}"
    return "-" if v is None else str(v)


def device_lines(prov_devices: list[dict[str, Any]], per_device: list[dict[str, Any]]) -> list[str]:
    """One line per device of a bench run: its provenance (name, arch, clocks, power limit) and the
    ceilings measured on it, so a `--device all` run shows what each device's figures are against."""
    by_index = {d.get("index"): d for d in prov_devices if isinstance(d, dict)}
    lines = []
    for share in per_device:
        dev = by_index.get(share["device"], {})
        nvml = dev.get("nvml") or {}
        ceil = share.get("ceilings") or {}
        line = (f"device {share['device']}: {share['name']} ({dev.get('arch') or '-'}), "
                f"SM clock {_mhz(nvml.get('sm_clock_mhz'))} (max {_mhz(nvml.get('max_sm_clock_mhz'))}), "
                f"memory clock {_mhz(nvml.get('memory_clock_mhz'))}, "
                f"power limit {_unit(nvml.get('power_limit_w'), 'W')}; "
                f"read ceiling {_gbps(ceil.get('read_bps'))}, copy ceiling {_gbps(ceil.get('copy_bps'))}; "
                f"{share['timings']} rows, {share['not_timed']} not timed")
        lines.append(line + (f"; {share['fault']}" if share.get("fault") else ""))
    return lines


def _unit(value, unit: str) -> str:
    return "-" if value is None else f"{value:g} {unit}"


def _mhz(value) -> str:
    return _unit(value, "MHz")


def _gbps(bps) -> str:
    return "-" if bps is None or bps != bps else f"{bps / 1e9:.0f} GB/s"
