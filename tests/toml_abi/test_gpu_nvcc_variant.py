"""The nvcc example (examples/nvcc_variant) on the GPU: bitwise equal to dequant's baseline on every default
case; the same kernels given as a prebuilt cubin pass too; and a variant with a declared error model shows
its max|err| and its ratio to the baseline's in the report. Needs nvcc on the GPU host (skips otherwise)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from strata_bench.kernels.sources import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "nvcc_variant"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                                reason="nvcc is not installed on this host")


@pytest.fixture
def dequant_with(tmp_path, monkeypatch):
    """dequant with the TOML files given loaded (its kernels loaded again with their sources), then removed."""
    from strata_bench.runs.catalog import build_catalog
    from strata_bench.cases.spec import RunSpec
    from strata_bench.toml_abi.variant import load_variant_files

    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))

    def load(*paths):
        families = build_catalog(RunSpec())  # each load a run's own catalog: its kernels load with its sources
        load_variant_files(tuple(str(p) for p in paths), families)
        return families["dequant"]

    return load


def _check_all(dequant, variant):
    from strata_bench.checks.parity import CaseStatus, check_case
    from strata_bench.kernels.build import load_kernels

    kernels = load_kernels(dequant, 0)
    results = []
    for case in dequant.default_cases():
        assert case.variants == ("dequant", variant)
        result = check_case(dequant, case, kernels, 0)
        assert result.status is CaseStatus.PASS, (case.name, [c.detail for c in result.checks if not c.ok])
        results.append(result)
    return results


@pytest.mark.gpu
@needs_nvcc
def test_the_nvcc_example_is_bitwise_equal_to_dequant(dequant_with):
    results = _check_all(dequant_with(EXAMPLE / "variants.toml"), "engine")
    bitwise = [c for r in results for c in r.checks if c.check == "bitwise"]
    assert bitwise and all(c.ok and c.variant == "engine" and c.detail == "" for c in bitwise)


@pytest.mark.gpu
@needs_nvcc
def test_a_prebuilt_cubin_of_the_example_passes(dequant_with, tmp_path):
    from strata_bench.kernels import build, nvcc
    from strata_bench.kernels.sources import kernels_dir

    arch = build.device_arch(0)
    built = nvcc.compile_cubin(EXAMPLE / "engine_dequant.cu", arch,
                               ("-std=c++17", "-O3", f"-I{kernels_dir()}", "-DENG_WARPS=4"), None)
    (tmp_path / "engine.cubin").write_bytes(built.cubin)
    text = (EXAMPLE / "variants.toml").read_text()
    text = text.replace('compiler = "nvcc"\n', "").replace('sources = ["engine_dequant.cu"]', 'binary = "engine.cubin"')
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith(("flags =", "defines =")))
    (tmp_path / "variants.toml").write_text(text.replace('name = "engine"', 'name = "prebuilt"'))
    results = _check_all(dequant_with(tmp_path / "variants.toml"), "prebuilt")
    assert all(c.ok and c.detail == "" for r in results for c in r.checks if c.check == "bitwise")


@pytest.mark.gpu
@needs_nvcc
def test_an_error_model_variant_shows_its_ratio_to_the_baseline(dequant_with, tmp_path):
    from strata_bench.report.live import parity_markdown

    # The example with every value scaled by (1 + 2^-20): not bitwise equal, within 1e-5 x max|ref|.
    source = (EXAMPLE / "engine_dequant.cu").read_text()
    scaled = source.replace("float v[32];\n    deq::Deq<F>::chunk(w.data + row * w.stride + (c / F::CHUNKS) * F::BYTES, "
                            "c % F::CHUNKS, v);",
                            "float v[32];\n    deq::Deq<F>::chunk(w.data + row * w.stride + (c / F::CHUNKS) * F::BYTES, "
                            "c % F::CHUNKS, v);\n    for (int i = 0; i < 32; ++i) v[i] *= 1.0f + 0x1p-20f;")
    assert scaled != source
    (tmp_path / "engine_dequant.cu").write_text(scaled)
    formats = ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "iq4_nl", "iq4_xs", "q8_0", "q2_0")
    text = (EXAMPLE / "variants.toml").read_text().replace('name = "engine"', 'name = "scaled"')
    text += "\n[variant.error]\nper_format = { " + ", ".join(f"{f} = 1e-5" for f in formats) + " }\n"
    (tmp_path / "variants.toml").write_text(text)
    results = _check_all(dequant_with(tmp_path / "variants.toml"), "scaled")
    models = [c for r in results for c in r.checks if c.check == "err-model" and c.label == "f64 exact"]
    assert len(models) == len(results) and all(c.ok and c.max_err > 0 for c in models)
    assert all(c.baseline_ratio == float("inf") for c in models)  # dequant's own error is 0
    assert "| max\\|err\\| vs baseline |" in parity_markdown(results).splitlines()[0]
