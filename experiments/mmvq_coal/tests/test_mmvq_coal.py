"""experiments/mmvq_coal: the copy geometry (exactly, against the kit's block layouts and every lane's block at
every step of several row lengths), the shared bytes, the variant table and cases, and the kernels: they compile
for sm_90 through the project's NVRTC path without spills, and (with nvcc on PATH) their PTX has no generic
load: the decoders read the copy with ld.shared, the weights arrive by ld.global.nc.v4 only."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from strata_bench.formats import get_format
from tests.cases_file import load_cases_file

ROOT = Path(__file__).resolve().parents[3]
COAL = load_cases_file("experiments/mmvq_coal/cases.py")


def test_geometry_mirrors_the_block_layouts():
    assert {f: COAL.coal_geometry(f) for f in COAL.FORMATS} == {
        "iq3_xxs": (392, 8, 25), "iq3_s": (440, 8, 28)}
    for fmt in COAL.FORMATS:
        layout = get_format(fmt)
        assert COAL.BLOCKS[fmt] == (layout.type_size, layout.block_size // 32)


@pytest.mark.parametrize("fmt", ["iq3_xxs", "iq3_s"])
@pytest.mark.parametrize("cols", [256, 1280, 2560, 8192, 14336])
def test_every_lanes_block_lies_in_the_granules_its_step_fetches(fmt, cols):
    """Step s of a row: the kernel fetches granules (s * STEP) // 16 .. + covered - 1 and decodes lane l's block
    (chunk l + 32 s, if it exists) from the buffer at phase + LaneWalk.first; the block's bytes (iq3 decodes read
    only inside their block) must lie in the fetched granules, and covered never exceeds the buffer's G."""
    step, _, g = COAL.coal_geometry(fmt)
    nbytes, chunks = COAL.BLOCKS[fmt]
    nchunks = cols // 32
    row_bytes = nchunks // chunks * nbytes
    steps = -(-nchunks // 32)
    for s in range(steps):
        covered = COAL.covered_granules(fmt, s, row_bytes)
        assert 1 <= covered <= g
        first_granule = (s * step) // 16
        for lane in range(32):
            c = lane + 32 * s
            if c >= nchunks:
                continue
            block = s * step + (lane // chunks) * nbytes  # row offset of the lane's block
            assert block + nbytes <= row_bytes
            assert first_granule * 16 <= block and block + nbytes <= (first_granule + covered) * 16
            # the buffer offset the kernel decodes at: phase + first, the same bytes as the row offset
            assert (s * step) % 16 + (lane // chunks) * nbytes == block - first_granule * 16
        # nothing fetched past the row's padded stride (rows start 16-aligned)
        assert (first_granule + covered) * 16 <= -(-row_bytes // 16) * 16


def test_slots_and_shared_bytes():
    assert [COAL.slots(f, r) for f in COAL.FORMATS for r in (2, 4)] == [2, 4, 2, 4]
    c = COAL.CoalConfig(2, 3, 4, 2)
    assert c.dynamic_bytes("iq3_s", 256) == 256 * 36 + 8 * 2 * 2 * 28 * 16
    assert c.dynamic_bytes("iq3_xxs", 7) == 256 + 8 * 2 * 2 * 25 * 16  # 252 bytes of planes rounded up to 16
    assert c.static_bytes("iq3_s") == 4 * (512 * 16 + 2) and c.static_bytes("iq3_xxs") == 4 * (256 * 16 + 2)
    optin = 227 * 1024
    for cfg in COAL.COAL_CONFIGS:
        for fmt in cfg.formats:
            for cols in (8192, 14336):
                assert cfg.dynamic_bytes(fmt, cols // 32) + cfg.static_bytes(fmt) <= optin


def test_variant_table_names_and_kernels():
    fam = COAL.MmvqCoal()
    names = [v.name for v in fam.variants]
    assert names[:2] == ["old", "new"] and len(names) == 2 + len(COAL.COAL_CONFIGS)
    assert "coal-r2m3u4b2" in names and "coal-r2m4u2b1" in names
    cfg = COAL.CoalConfig(2, 3, 4, 2)
    assert cfg.kernel("iq3_xxs") == "mmvq_coal<siq::sign_masked_rep<siq::fmt_iq3_xxs, true, 16>, 2, 3, 4, false, 2>"
    assert cfg.kernel("iq3_s") == "mmvq_coal<siq::sign_masked_rep<siq::fmt_iq3_s, false, 16>, 2, 3, 4, false, 2>"
    own = fam.name_expressions(COAL.OWN_SOURCE)
    assert len(own) == sum(len(c.formats) for c in COAL.COAL_CONFIGS) == 13


def test_cases_cover_tails_and_the_dram_shape():
    fam = COAL.MmvqCoal()
    shapes = {(c.fmt, c.rows, c.cols, c.ncols) for c in fam.default_cases()}
    for fmt in COAL.FORMATS:
        for rows, cols in ((37, 1280), (3, 256), (1000, 14336), (8192, 2560), (16384, 512)):
            assert {(fmt, rows, cols, 1), (fmt, rows, cols, 11)} <= shapes
    bench = {(c.fmt, c.rows, c.cols, c.ncols) for c in fam.bench_cases()}
    assert bench == {(f, r, k, 1) for f in COAL.FORMATS for r, k in ((131072, 8192), (4096, 14336))}


def _kernels() -> list[str]:
    return COAL.MmvqCoal().name_expressions(COAL.OWN_SOURCE)


@pytest.mark.slow  # an NVRTC compile of every candidate (about 9 s on 2 cores)
@pytest.mark.nvrtc
def test_kernels_compile_for_sm_90_without_spills():
    from strata_bench.kernels.build import compile_source

    built = compile_source(COAL.OWN_SOURCE, _kernels(), "sm_90", root=COAL.KERNELS)
    assert set(built.lowered) == set(_kernels())
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", built.log)
    assert len(spills) >= len(_kernels()) and all(s == ("0", "0") for s in spills), built.log


NVCC = shutil.which("nvcc")


@pytest.mark.slow  # an nvcc compile to PTX (about 8 s)
@pytest.mark.skipif(NVCC is None, reason="no nvcc on PATH: the PTX is not read")
def test_ptx_reads_the_copy_from_shared_memory_and_the_weights_coalesced(tmp_path):
    exprs = _kernels()
    inst = "".join(f"template __global__ void {e}(const uint8_t* __restrict__, long long, int, int, "
                   "const block_q8_1* __restrict__, float* __restrict__, int);\n" for e in exprs)
    src = tmp_path / "inst.cu"
    src.write_text('#include "mmvq_coal.cu"\n' + inst)
    ptx = tmp_path / "inst.ptx"
    subprocess.run([NVCC, "-ptx", "-arch=sm_90", "-std=c++17", f"-I{ROOT / 'kernels_src'}", f"-I{COAL.KERNELS}",
                    str(src), "-o", str(ptx)], check=True, capture_output=True)
    loads = re.findall(r"^\s*(?:@%p\d+\s+)?(ld(?:\.[a-z0-9]+)+)", ptx.read_text(), re.M)
    generic = [ld for ld in loads if not re.match(r"ld\.(shared|global|param|const|local)", ld)]
    assert not generic, f"generic loads: {sorted(set(generic))}"
    # global loads: the granules (v4), the table and activation staging (u32, the fp16 d as u16); nothing else
    assert {ld for ld in loads if ld.startswith("ld.global")} <= {"ld.global.nc.v4.u32", "ld.global.nc.u32",
                                                                 "ld.global.nc.u16"}
    assert not [ld for ld in loads if ld.startswith("ld.local")]
