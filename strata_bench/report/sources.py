"""Where a run's real weights came from, for a pull-request table: each fixture with its file, the
file's sha256 prefix, the tensor and the rows (cases/fixtures.py: fixture_sources)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence


def sources_markdown(sources: Sequence[Mapping[str, Any]]) -> str:
    """A markdown table of the fixtures a run used ("" when it used none)."""
    if not sources:
        return ""
    lines = ["Real weights:", "", "| fixture | file | sha256 | tensor | rows |", "|---|---|---|---|---|"]
    for s in sources:
        cells = [f"`{s['fixture']}`", *(_cell(s.get(k)) for k in ("file", "sha256", "tensor", "rows"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return "-" if value in (None, "") else f"`{value}`"
