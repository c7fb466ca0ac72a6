"""GGUF type ids: 42 is always upstream's Q2_0, the engine's Q2_0 has no id, every other id is gguf-py's."""
from __future__ import annotations

import gguf
import pytest

from strata_bench.errors import InputError
from strata_bench.formats import QuantFormat, all_formats, get_format
from strata_bench.formats.gguf_types import (format_for_gguf_type, formats_by_gguf_type, gguf_type_id,
                                             gguf_type_to_write)


def test_type_42_is_read_as_upstream_q2_0_and_never_as_the_engines():
    assert format_for_gguf_type(42) is get_format("q2_0_ggml")
    assert [f.name for f in all_formats().values() if gguf_type_id(f) == 42] == ["q2_0_ggml"]
    assert gguf_type_to_write(get_format("q2_0_ggml")) == 42


def test_the_engines_q2_0_has_no_gguf_type_and_cannot_be_written():
    engine = get_format("q2_0")
    assert engine.gguf_type_id is None and gguf_type_id(engine) is None
    assert engine not in formats_by_gguf_type().values()
    with pytest.raises(InputError, match="q2_0 is this project's own format"):
        gguf_type_to_write(engine)


def test_every_gguf_py_type_maps_to_its_format_and_back():
    with_types = [f for f in all_formats().values() if f.qtype is not None]
    assert len(with_types) == 23
    for fmt in with_types:
        assert fmt.gguf_type_id == int(fmt.qtype)
        assert format_for_gguf_type(fmt.qtype) is fmt  # the enum member works as well as the int
        assert format_for_gguf_type(int(fmt.qtype)) is fmt
        assert gguf_type_to_write(fmt) == int(fmt.qtype)
    assert len(formats_by_gguf_type()) == 24  # the 23 and upstream Q2_0


@pytest.mark.parametrize("type_id", [int(gguf.GGMLQuantizationType.F32), int(gguf.GGMLQuantizationType.Q8_1),
                                     41, 43, 999])
def test_unknown_or_unquantized_type_ids_are_input_errors(type_id):
    with pytest.raises(InputError, match=f"GGUF type id {type_id} "):
        format_for_gguf_type(type_id)


def test_two_formats_claiming_one_type_id_is_refused(monkeypatch):
    class Impostor(QuantFormat):  # no name: not registered by the class statement
        name, block_size, type_size, qtype = "impostor", 64, 18, None
        gguf_type_id = 42

    formats = dict(all_formats())
    formats["impostor"] = Impostor()
    monkeypatch.setattr("strata_bench.formats.gguf_types.all_formats", lambda: formats)
    with pytest.raises(RuntimeError, match="both claim GGUF type id 42"):
        format_for_gguf_type(42)
