"""kernels/cubin_symbols.py: a declared kernel name found among a cubin's symbols, demangled."""
from __future__ import annotations

from pathlib import Path

import pytest

from strata_bench.kernels import cubin, cubin_symbols
from strata_bench.kernels.cubin_symbols import KernelNotFound, declared_name, find_kernel, normalize

DATA = Path(__file__).parent / "data"
needs_demangler = pytest.mark.skipif(cubin_symbols.demangler() is None,
                                     reason="no c++filt, cu++filt or llvm-cxxfilt on PATH")


@pytest.fixture
def symbols():
    return list(cubin.read_elf((DATA / "params_sm90.cubin").read_bytes()).kernels)


def test_declared_name_and_normalize():
    assert declared_name("void k<(t)16, 1>(void const*, int)") == "k<(t)16, 1>"
    assert declared_name("plain(float*, char (*)[4])") == "plain"
    assert normalize(" k< a ,  unsigned int >") == "k<a,unsigned int>"


@needs_demangler
def test_found_by_declared_name(symbols):
    assert find_kernel("matvec<(eng::qtype)16,2>", symbols, "w") == (
        "_Z6matvecILN3eng5qtypeE16ELi2EEvPKvPKfNS0_6fusionEPf5uint3ix")
    assert find_kernel("plain", symbols, "w") == "_Z5plainPfcsd"
    assert find_kernel("_Z5plainPfcsd", symbols, "w") == "_Z5plainPfcsd"  # a mangled name matches itself


@needs_demangler
@pytest.mark.parametrize("declared,line", [
    ("matvec", "w: kernel 'matvec' matches 3 kernels: matvec<(eng::qtype)16, 1>, matvec<(eng::qtype)16, 2>, "
               "matvec<(eng::qtype)20, 1>"),
    ("matvec<(eng::qtype)16, 3>", "w: kernel 'matvec<(eng::qtype)16, 3>' matches no kernel of the cubin (kernels: "
                                  "matvec<(eng::qtype)16, 1>, matvec<(eng::qtype)16, 2>, matvec<(eng::qtype)20, 1>)"),
    ("plane", "w: kernel 'plane' matches no kernel of the cubin (kernels: matvec<(eng::qtype)16, 1>, "
              "matvec<(eng::qtype)16, 2>, matvec<(eng::qtype)20, 1>, plain)"),
])
def test_no_match_or_several_is_one_line_naming_candidates(symbols, declared, line):
    with pytest.raises(KernelNotFound) as err:
        find_kernel(declared, symbols, "w")
    assert str(err.value) == line


def test_without_a_demangler_names_are_mangled(symbols, monkeypatch):
    monkeypatch.setattr(cubin_symbols, "demangler", lambda: None)
    assert find_kernel("_Z5plainPfcsd", symbols, "w") == "_Z5plainPfcsd"
    with pytest.raises(KernelNotFound) as err:
        find_kernel("plain", symbols, "w")
    assert str(err.value).endswith("; no demangler found (cu++filt, c++filt, llvm-cxxfilt): names are compared "
                                   "as mangled symbols")


def test_the_two_demanglers_spellings_normalize_alike():
    # cu++filt (the toolkit's) types template values and hides nvcc's internal namespace; c++filt does not.
    assert normalize("mul_mat_vec_q<(ggml_type)10, (int)1, (bool)0, (bool)1, (bool)0>") == \
        normalize("mul_mat_vec_q<(ggml_type)10, 1, false, true, false>") == "mul_mat_vec_q<(ggml_type)10,1,false,true,false>"
    assert normalize("dequantize_block<(int)32, (int)2, &dequantize_q4_0, float>") == \
        normalize("dequantize_block<32, 2, &_INTERNAL_aef01cfe_10_convert_cu_cdcd2d29_7247::dequantize_q4_0, float>")
    assert normalize("k<(unsigned int)5, (long long)-3>") == "k<5,-3>"
    # cu++filt puts a pointee's const first, c++filt after it (binbcast's pack of source pointers)
    assert normalize("k_bin_bcast<&op_add, float, float, float, const float *>") == \
        normalize("k_bin_bcast<&op_add, float, float, float, float const*>") == \
        "k_bin_bcast<&op_add,float,float,float,float const*>"
    assert normalize("k<const __half *, const ns::T &>") == normalize("k<__half const*, ns::T const&>")
    assert normalize("k<const int>") == "k<const int>"  # not a pointee: left as it is
    assert normalize("k<(ggml_type)1>") != normalize("k<1>")  # an enum's cast is part of the name
    # c++filt spells a function template argument with its type (nvcc's cpy_scalar<cpy_1_scalar<float, half>>)
    assert normalize(declared_name(
        "void cpy_scalar<&(void _INTERNAL_00000000_6_cpy_cu_bfba63e2::cpy_1_scalar<float, __half>(char const*, "
        "char*))>(char const*, char*, long)")) == normalize("cpy_scalar<&cpy_1_scalar<float, __half>>")
    assert normalize("dequantize_block<32, 1, &(dequantize_q8_0(void const*, long, int, float2&)), float>") == \
        normalize("dequantize_block<32, 1, &dequantize_q8_0, float>")
