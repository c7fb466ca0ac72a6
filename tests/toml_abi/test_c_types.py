"""toml_abi/c_types.py: sizes, alignments and by-value encodings of the C types a TOML ABI names."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.toml_abi.c_types import as_argument, layout, parse_ctype, struct_type
from strata_bench.errors import InputError


@pytest.mark.parametrize("text,kind,size,align", [
    ("const float* __restrict__", "pointer", 8, 8), ("const block_q8_1*", "pointer", 8, 8),
    ("int", "scalar", 4, 4), ("long long", "scalar", 8, 8), ("const int", "scalar", 4, 4),
    ("unsigned char", "scalar", 1, 1), ("__half", "scalar", 2, 2), ("double", "scalar", 8, 8),
    ("uint3", "vector", 12, 4), ("const uint3", "vector", 12, 4), ("uint2", "vector", 8, 8),
    ("float4", "vector", 16, 16), ("half2", "vector", 4, 4),
])
def test_sizes_and_alignments(text, kind, size, align):
    ctype = parse_ctype(text)
    assert (ctype.kind, ctype.size, ctype.align, ctype.dtype().itemsize) == (kind, size, align, size)


def test_struct_layout_and_parameter_offsets():
    # ggml's fusion struct: 5 pointers, an enum, a float = 48 bytes (docs ENGINES.md), as nvcc lays it out.
    ptr, i32, f32 = parse_ctype("const float*"), parse_ctype("int"), parse_ctype("float")
    fusion = struct_type("fusion", [("x_bias", ptr), ("gate", ptr), ("gate_bias", ptr), ("y_bias", ptr),
                                    ("z", ptr), ("glu_op", i32), ("glu_param", f32)])
    assert (fusion.size, fusion.align) == (48, 8)
    odd = struct_type("odd", [("c", parse_ctype("char")), ("d", parse_ctype("double")), ("s", parse_ctype("short"))])
    assert [o for _, _, o in odd.fields] == [0, 8, 16] and odd.size == 24
    # params.cu's matvec: void*, float*, fusion{2 ptr, int, float}, float*, uint3, int, long long
    small = struct_type("f", [("a", ptr), ("b", ptr), ("op", i32), ("s", f32)])
    types = [ptr, ptr, small, ptr, parse_ctype("uint3"), i32, parse_ctype("long long")]
    assert layout(types) == [0, 8, 16, 40, 48, 60, 64]


def test_values_are_encoded_as_the_kernel_reads_them():
    ptr, i32, f32 = parse_ctype("const float*"), parse_ctype("int"), parse_ctype("float")
    fusion = struct_type("f", [("a", ptr), ("b", ptr), ("op", i32), ("s", f32)])
    record = as_argument(fusion, {"b": 0x1000, "op": 3, "s": 0.5})
    assert isinstance(record, np.ndarray) and record.shape == () and record.tobytes() == (
        bytes(8) + (0x1000).to_bytes(8, "little") + (3).to_bytes(4, "little") + np.float32(0.5).tobytes())
    assert as_argument(parse_ctype("uint3"), [1, 2, 3]).tobytes() == np.array([1, 2, 3], np.uint32).tobytes()
    assert as_argument(i32, 7) == np.int32(7) and type(as_argument(i32, 7)) is np.int32
    assert type(as_argument(ptr, 0)) is np.uint64  # a null pointer


def test_unknown_type_names_the_kinds():
    with pytest.raises(InputError, match=r"^unknown C type 'ggml_type' \(a pointer, a scalar such as int"):
        parse_ctype("ggml_type")
