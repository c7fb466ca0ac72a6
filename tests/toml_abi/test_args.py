"""toml_abi/args.py: the argument tables of a TOML launch (typed values, null pointers, fastdiv, vectors,
structs) parse against the ABI and give the values a kernel takes."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.families import load_builtin_families
from strata_bench.toml_abi.args import Context, fastdiv_values, parse_arg, parse_structs
from strata_bench.errors import InputError

STRUCTS = {"struct": {"fusion": {"bias": "const float*", "gate": "const float*", "op": "int", "scale": "float"}}}


@pytest.fixture
def abi():
    return load_builtin_families()["mmvq"].launch_abi()


@pytest.fixture
def structs():
    return parse_structs(STRUCTS, "v.toml")


def _ctx(abi, case):
    dev = {"w": "W", "xq": "XQ", "x": "X"}
    return Context(abi, case, abi.fields(case), dev, {"y": "Y"})


def test_fastdiv_divides_like_division():
    rng = np.random.default_rng(1)
    for d in (1, 2, 3, 7, 11, 36, 100, 4096, 65537, 2**31 + 11, 2**32 - 1):
        mp, shift, dd = fastdiv_values(d)
        n = np.concatenate([rng.integers(0, 2**32, 2000, dtype=np.uint64), np.array([0, 2**32 - 1, d, d - 1],
                                                                                     dtype=np.uint64)])
        hi = (n * np.uint64(mp)) >> np.uint64(32)
        assert dd == d and np.array_equal((hi + n) >> np.uint64(shift), n // np.uint64(d)), d
    with pytest.raises(InputError, match="the divisor must be in 1 .. 2"):
        fastdiv_values(0)


def test_every_kind_of_argument(abi, structs):
    case = load_builtin_families()["mmvq"].case("iq2_xxs", 512, 2560, 3)
    ctx = _ctx(abi, case)
    args = [parse_arg(item, abi, structs, f"args[{i}]") for i, item in enumerate([
        "w",
        {"type": "int", "value": "exact_div(row_bytes, block_bytes)"},
        {"type": "const int*", "value": "null"},
        {"type": "uint3", "fastdiv": "ncols"},
        {"type": "uint3", "value": ["rows", 1, "ncols * 2"]},
        {"type": "float", "value": 0.25},
        {"type": "long long", "value": "rows"},
        {"struct": "fusion", "gate": "x", "scale": 2.0},
    ])]
    assert [a.label for a in args] == ["w", "int exact_div(row_bytes, block_bytes)", "const int* null",
                                       "uint3 fastdiv ncols", "uint3 ['rows', 1, 'ncols * 2']", "float 0.25",
                                       "long long rows", "struct fusion"]
    assert [a.ctype.size for a in args] == [8, 4, 8, 12, 12, 4, 8, 24]
    assert args[0].value(ctx) == "W"
    assert args[1].value(ctx) == np.int32(2560 // 256 * 66 // 66)  # 10 blocks of 66 bytes
    assert type(args[2].value(ctx)) is np.uint64 and args[2].value(ctx) == 0
    assert args[3].value(ctx).tobytes() == np.array(fastdiv_values(3), np.uint32).tobytes()
    assert args[4].value(ctx).tobytes() == np.array([512, 1, 6], np.uint32).tobytes()
    assert type(args[5].value(ctx)) is np.float32 and type(args[6].value(ctx)) is np.int64


def test_a_struct_field_holds_a_device_pointer(abi, structs):
    class Array:  # what a cupy array looks like to the encoder: .data.ptr
        data = type("P", (), {"ptr": 0xABC0})()

    case = load_builtin_families()["mmvq"].case("q8_0", 64, 256, 1)
    ctx = Context(abi, case, abi.fields(case), {"x": Array()}, {})
    arg = parse_arg({"struct": "fusion", "gate": "x", "op": "ncols", "scale": 2.0}, abi, structs, "a")
    assert arg.value(ctx).tobytes() == (bytes(8) + (0xABC0).to_bytes(8, "little") + (1).to_bytes(4, "little")
                                        + np.float32(2.0).tobytes())


@pytest.mark.parametrize("item,line", [
    ({"struct": "fusion", "gat": "null"}, "a.gat: unknown field of struct fusion (fields: bias, gate, op, scale)"),
    ({"struct": "fuse"}, "a.struct: unknown struct 'fuse' (structs: fusion; declare it in a [struct.fuse] table)"),
    ({"type": "int", "value": 1.5}, "a: 1.5 is not an integer (int)"),
    ({"type": "const float*", "value": "rows"}, "a: a pointer is \"null\" or a pointer argument of the mmvq ABI "
                                                "(w, xq, x, y), got 'rows'"),
    ({"type": "uint3", "value": [1, 2]}, "a: a uint3 value is a list of 3 components or { fastdiv = EXPR }, got [1, 2]"),
    ({"type": "int", "value": "rowz"}, "a: 'rowz' uses unknown field 'rowz' (fields: rows, cols, ncols, nchunks, "),
    ({"type": "ggml_type", "value": 1}, "a.type: unknown C type 'ggml_type' (a pointer, a scalar such as int, "),
    ({"type": "int", "value": 1, "fastdiv": "rows"}, "a: give value or fastdiv (one of them)"),
    ({"type": "int", "valeu": 1}, "a.valeu: unknown key (an argument table has type and value, or type uint3 and "),
    ({"value": 1}, "a: a typed argument needs type (and value or fastdiv)"),
    (3, "a: expected an ABI argument name or a table (type, value, fastdiv, struct), got 3"),
    # A constant that cannot fit its type is refused when the file is read (it passed --list and compile).
    ({"type": "int", "value": 99999999999}, "a: 99999999999 does not fit int"),
    ({"type": "int", "value": "99999999999 + 0"}, "a: 99999999999 does not fit int"),
    ({"type": "unsigned int", "value": -1}, "a: -1 does not fit unsigned int"),
    ({"type": "float", "value": 1e300}, "a: 1e+300 does not fit float"),
    ({"type": "int", "value": "*".join(["9" * 4000] * 3)}, "a: an integer of 39864 bits does not fit int"),
])
def test_errors_name_the_key(abi, structs, item, line):
    with pytest.raises(InputError) as err:
        parse_arg(item, abi, structs, "a")
    assert str(err.value).startswith(line), str(err.value)


def test_struct_tables_are_checked(abi):
    with pytest.raises(InputError, match=r"^v.toml: struct.s.f: unknown C type 'nope' "):
        parse_structs({"struct": {"s": {"f": "nope"}}}, "v.toml")
    with pytest.raises(InputError, match=r"^v.toml: struct.s: a struct needs a C name and at least one field$"):
        parse_structs({"struct": {"s": {}}}, "v.toml")
    nested = parse_structs({"struct": {"a": {"x": "int"}, "b": {"a": "a", "y": "double"}}}, "v.toml")
    assert (nested["b"].size, nested["b"].align) == (16, 8)
