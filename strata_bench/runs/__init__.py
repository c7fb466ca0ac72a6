"""The runs behind the commands: parity over the selected cases on each device, with its results written
as it goes. A command parses its options, calls a run, renders what it returns and maps errors to exit
codes; the progress display comes in as a callback, so this layer draws nothing itself."""
from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from strata_bench.cases import Case

Progress = Callable[[str, int], AbstractContextManager]  # (label, total) -> context giving advance()


@dataclass(frozen=True)
class Selection:
    """The cases a run goes over, the run's catalog of families they come from, the devices it runs them
    on, and where it keeps the records."""

    catalog: Mapping[str, Any]
    cases: Sequence[Case]
    devices: Sequence[int]
    names: dict[int, str]  # device -> product name (results/<device>/ is named after the first)
    results_dir: Path
    spec: Any = None  # the cases/spec.RunSpec that declared the run, recorded in the provenance

    def families_used(self) -> dict[str, Any]:
        return {c.family: self.catalog[c.family] for c in self.cases}

    def progress_bar(self, progress: Progress | None, label: str) -> AbstractContextManager:
        """The run's progress display over every (case, device), or one that shows nothing."""
        if progress is None:
            return nullcontext(lambda *args: None)
        return progress(label, len(self.cases) * len(self.devices))

    def results_writer(self, kind: str, **provenance_extra: Any):
        """One results file per run, in the first device's folder; its provenance lists every device the run
        used and the source closure of every family its cases compile."""
        from strata_bench.results import provenance
        from strata_bench.results.paths import device_directory
        from strata_bench.results.store import ResultsWriter

        prov = provenance.collect(list(self.devices), families=self.families_used())
        if self.spec is not None:
            prov["run"] = provenance.inside_relative(self.spec.provenance())
        prov.update(provenance_extra)
        return ResultsWriter(device_directory(self.results_dir, self.names[self.devices[0]]), kind, prov)
