"""mmvq.plan: ggml's mul_mat_vec_q launch (GENERIC table) for a case, checked value by value without a GPU:
the instance (small_k where ggml takes it), grid, block and every argument; the rows a launch reads; the
devices refused; the instances a build lists."""
from __future__ import annotations

import pytest

from strata_bench.errors import InputError
from strata_bench.ggml import mmvq
from strata_bench.ggml.launch import needs_packing
from strata_bench.ggml.tree import locate

ONE = (1, 0, 1)  # init_fastdiv_values(1): mp 1, L 0, d 1
W, XQ, Y = object(), object(), object()  # stand-ins for the device pointers


@pytest.fixture
def tree(fake_tree):
    return locate(fake_tree)


def _fields(rows, cols, ncols, block_values, block_bytes, stride, row_bytes):
    return {"rows": rows, "cols": cols, "ncols": ncols, "nchunks": cols // 32, "stride": stride,
            "row_bytes": row_bytes, "block_bytes": block_bytes, "block_values": block_values}


def _values(launch):
    return {p.label: p.value for p in launch.params}


def _args(rows, cols, ncols, blocks_per_row_stride):
    return {"vx": W, "vy": XQ, "ids": 0, "fusion": {}, "dst": Y, "ncols_x": cols, "nchannels_y": (0, 0, 0),
            "stride_row_x": blocks_per_row_stride, "stride_col_y": cols // 32, "stride_col_dst": rows,
            "channel_ratio": ONE, "stride_channel_x": 0, "stride_channel_y": 0, "stride_channel_dst": 0,
            "sample_ratio": ONE, "stride_sample_x": 0, "stride_sample_y": 0, "stride_sample_dst": 0,
            "ids_stride": 0}


# fmt, (rows, cols, ncols, block values, block bytes, stride, row bytes), kernel's template arguments,
# grid x, warps, stride_row_x (blocks per row, packed), rows read, packed?
PLANS = [
    # 1 block per row < 4 warps x (vdr 2 x 32 / qi 16): small_k, 4 rows per CUDA block; rows 80 bytes apart
    ("iq2_xxs", (64, 256, 1, 256, 66, 80, 66), "16, 1, false, true", 16, 4, 1, 64, True),
    ("iq3_s", (64, 256, 1, 256, 110, 112, 110), "21, 1, false, false", 64, 4, 1, 64, True),  # never small_k
    # 5 columns: 2 warps, 2 rows per block; the last block reads row 67, one past the last (a zero row)
    ("iq2_xxs", (67, 4096, 5, 256, 66, 1056, 1056), "16, 5, false, false", 34, 2, 16, 68, True),
    ("iq2_xxs", (68, 4096, 5, 256, 66, 1056, 1056), "16, 5, false, false", 34, 2, 16, 68, False),
    ("q8_0", (64, 288, 8, 32, 34, 320, 306), "8, 8, false, false", 32, 2, 9, 64, True),
]


@pytest.mark.parametrize("fmt,shape,template,grid,warps,blocks,readable,packed", PLANS)
def test_plans(tree, fmt, shape, template, grid, warps, blocks, readable, packed):
    f = _fields(*shape)
    launch = mmvq.plan(tree, fmt, f, W, f["row_bytes"], XQ, Y)
    assert launch.kernel == f"mul_mat_vec_q<(ggml_type){template}, false>"
    assert (launch.grid, launch.block) == ((grid, 1, 1), (32, warps, 1))
    assert _values(launch) == _args(f["rows"], f["cols"], f["ncols"], blocks)
    assert [(p.label, p.ctype) for p in launch.params] == list(mmvq.SIGNATURE)
    assert mmvq.readable_rows(tree, f, fmt) == readable
    assert needs_packing(f["stride"], f["row_bytes"], f["rows"], readable) == packed


@pytest.mark.parametrize("cols,small", [(992, True), (1024, False)])
def test_small_k_ends_where_four_warps_fill_one_trip(tree, cols, small):
    # q8_0: qi 8, vdr 2: 8 blocks per warp and trip, 32 for 4 warps.
    f = _fields(10, cols, 1, 32, 34, cols // 32 * 34, cols // 32 * 34)
    launch = mmvq.plan(tree, "q8_0", f, W, f["row_bytes"], XQ, Y)
    assert launch.kernel == f"mul_mat_vec_q<(ggml_type)8, 1, false, {str(small).lower()}, false>"
    assert launch.grid == ((3, 1, 1) if small else (10, 1, 1))
    assert mmvq.readable_rows(tree, f, "q8_0") == (12 if small else 10)


@pytest.mark.parametrize("ncols,warps,rpb", [(2, 4, 2), (4, 4, 2), (6, 2, 2)])
def test_small_k_is_for_one_column_only(tree, ncols, warps, rpb):
    f = _fields(9, 256, ncols, 256, 66, 66, 66)
    launch = mmvq.plan(tree, "iq2_xxs", f, W, 66, XQ, Y)
    assert launch.kernel == f"mul_mat_vec_q<(ggml_type)16, {ncols}, false, false, false>"
    assert (launch.grid, launch.block) == ((5, 1, 1), (32, warps, 1))


@pytest.mark.parametrize("major,minor", [(7, 5), (7, 0), (12, 1)])
def test_devices_with_another_table_are_refused(major, minor):
    with pytest.raises(InputError) as err:
        mmvq.check_device(major, minor)
    assert str(err.value) == (f"--ggml: ggml launches mul_mat_vec_q with its own table on compute capability "
                              f"{major}.{minor}; the adapter writes only the GENERIC one (8.0 and newer, not 12.1)")


@pytest.mark.parametrize("major,minor", [(8, 0), (8, 9), (9, 0), (10, 0), (12, 0)])
def test_generic_devices_are_accepted(major, minor):
    assert mmvq.check_device(major, minor) is None


def test_instances(tree):
    assert mmvq.instances(tree, ["iq2_xxs"]) == [
        "mul_mat_vec_q<(ggml_type)16, 1, false, false, false>", "mul_mat_vec_q<(ggml_type)16, 1, false, true, false>",
        *[f"mul_mat_vec_q<(ggml_type)16, {n}, false, false, false>" for n in range(2, 9)]]
    assert mmvq.instances(tree, ["iq3_s"]) == [f"mul_mat_vec_q<(ggml_type)21, {n}, false, false, false>"
                                               for n in range(1, 9)]
    assert len(mmvq.instances(tree, tree.formats)) == 9 * 4 + 8
