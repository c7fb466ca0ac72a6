"""The source closures a result records: per family, per TOML-added source, portable names, changes."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from strata_bench.results import closures
from strata_bench.kernels.sources import REPO_ROOT


class Family:
    """What the closures read of a family: its name, sources (a class attribute), root and options."""

    name = "fam"
    sources: tuple[str, ...] = ("fam/fam.cu",)
    kernels_root = None

    def source_options(self, source: str) -> tuple[str, ...]:
        return self.__dict__.get("_options", {}).get(source, ())


@pytest.fixture
def kernels(tmp_path, monkeypatch):
    """A kernels folder (STRATA_KERNELS_SRC) with two families' sources sharing a header, and an include
    folder outside it."""
    files = {
        "kernels/fam/fam.cu": '#include "common/shared.cuh"\n#include <extra.cuh>\n#include <cuda_fp16.h>\n',
        "kernels/other/other.cu": '#include "common/shared.cuh"\n',
        "kernels/common/shared.cuh": "#define SHARED 1\n",
        "kernels/experiment/exp.cu": '#include "common/shared.cuh"\n',
        "include/extra.cuh": "#define EXTRA 1\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setenv("STRATA_KERNELS_SRC", str(tmp_path / "kernels"))
    return tmp_path


def family(include: Path | None = None) -> Family:
    fam = Family()
    if include is not None:
        fam._options = {"fam/fam.cu": (f"-I{include}",)}
    return fam


def test_a_family_records_every_file_its_sources_read(kernels):
    (record,) = closures.family_records({"fam": family(kernels / "include")}).values()
    extra = str(kernels / "include" / "extra.cuh")
    assert list(record["files"]) == [extra, "kernels_src/common/shared.cuh", "kernels_src/fam/fam.cu"]
    assert record["units"] == [{"source": "kernels_src/fam/fam.cu",
                                "include": ["kernels_src", "<cuda>", str(kernels / "include")]}]
    assert record["hash"] == closures.parse({"fam": record})["fam"].hash


def test_a_toml_added_source_is_its_own_record(kernels):
    fam = family()
    fam.sources = (*Family.sources, str(kernels / "include" / "extra.cuh"))  # as Family.add_variant does
    records = closures.family_records({"fam": fam})
    added = f"fam:{kernels / 'include' / 'extra.cuh'}"
    assert list(records) == ["fam", added]
    assert list(records[added]["files"]) == [str(kernels / "include" / "extra.cuh")]


def test_changes_name_each_file_changed_added_or_removed(kernels):
    record = closures.parse(closures.family_records({"fam": family(kernels / "include")}))["fam"]
    assert closures.changes(record, closures.current(record)) == ()
    (kernels / "include" / "extra.cuh").write_text("#define EXTRA 2\n")
    (kernels / "kernels" / "fam" / "fam.cu").write_text('#include "fam/new.cuh"\n#include <extra.cuh>\n')
    (kernels / "kernels" / "fam" / "new.cuh").write_text("")
    assert closures.changes(record, closures.current(record)) == (
        f"{kernels / 'include' / 'extra.cuh'} changed", "kernels_src/common/shared.cuh removed",
        "kernels_src/fam/fam.cu changed", "kernels_src/fam/new.cuh added")


def test_an_edit_no_source_reads_changes_nothing(kernels):
    record = closures.parse(closures.family_records({"fam": family(kernels / "include")}))["fam"]
    (kernels / "kernels" / "experiment" / "exp.cu").write_text("// an experiment's edit\n")
    (kernels / "kernels" / "other" / "other.cu").write_text("// another family's edit\n")
    assert closures.changes(record, closures.current(record)) == ()


def test_names_are_portable():
    assert closures.recorded_name(closures.located("kernels_src/mmvq/mmvq.cu")) == "kernels_src/mmvq/mmvq.cu"
    assert closures.located("examples/x.cu") == REPO_ROOT / "examples" / "x.cu"
    assert closures.recorded_name(Path("/elsewhere/k.cu")) == "/elsewhere/k.cu"


@pytest.mark.parametrize("value, message", [
    ([], "sources is not an object"),
    ({"mmvq": {"files": {}}}, "sources: mmvq: not a closure record (files and units)"),
    ({"mmvq": {"files": [], "units": []}}, "sources: mmvq: not a closure record (files and units)"),
])
def test_a_malformed_record_is_an_input_error(value, message):
    with pytest.raises(closures.InputError, match=f"^{re.escape(message)}$"):
        closures.parse(value)


def test_provenance_records_the_closures_of_the_families_named():
    from strata_bench.families import load_builtin_families
    from strata_bench.results import provenance

    q8_1 = load_builtin_families()["q8_1"]
    prov = provenance.collect(None, archs=[], families={"q8_1": q8_1})
    assert list(prov["sources"]) == ["q8_1"]
    assert list(prov["sources"]["q8_1"]["files"]) == [
        "kernels_src/common/strata_common.cuh", "kernels_src/formats/q8_1.cuh",
        "kernels_src/generated/strata_constants.cuh", "kernels_src/q8_1/q8_1.cu"]
    # A command A/B names no family (it may run anything): judged by kernels_src_hash alone.
    assert "sources" not in provenance.collect(None, archs=[])
