"""Real weights as cases (cases/fixtures.py): one hook per family turns a fixture into its cases; the
built-in real-weight defaults go through it; --fixtures globs; a fixture no family takes is named."""
from __future__ import annotations

import pytest

from strata_bench.cases import CaseFilter, FixtureRef

from strata_bench.cases.fixtures import describe_source, fixture_request_cases, fixture_sources, matching_fixtures
from strata_bench.cases.request import CaseRequest
from strata_bench.errors import InputError

# The real-weight cases of the default list before the hook existed (parity --list: 412 cases then, 482 now).
SHIPPED_FIXTURE_CASES = [
    "dequant/iq2_xxs/64x1536/n1/fixture:smollm2-ffn_down.iq2_xxs",
    "dequant/iq2_xs/64x1536/n1/fixture:smollm2-ffn_down.iq2_xs",
    "dequant/iq2_s/64x1536/n1/fixture:smollm2-ffn_down.iq2_s",
    "dequant/iq3_xxs/64x1536/n1/fixture:smollm2-ffn_down.iq3_xxs",
    "dequant/iq3_s/64x1536/n1/fixture:smollm2-ffn_down.iq3_s",
    "dequant/iq1_s/64x1536/n1/fixture:smollm2-ffn_down.iq1_s",
    "dequant/iq1_m/64x1536/n1/fixture:smollm2-ffn_down.iq1_m",
    "dequant/iq4_nl/64x1536/n1/fixture:smollm2-ffn_down.iq4_nl",
    "dequant/iq4_xs/64x1536/n1/fixture:smollm2-ffn_down.iq4_xs",
    "dequant/q8_0/64x1536/n1/fixture:smollm2-ffn_down.q8_0",
    "dequant/q2_0/64x1536/n1/fixture:smollm2-ffn_down.q8_0",
    "fp16deq/q8_0/64x1536/n1/fixture:smollm2-ffn_down.q8_0/path=vec16",
    "fp16deq/iq4_xs/64x1536/n1/fixture:smollm2-ffn_down.iq4_xs/path=vec16",
    "mmvq/iq2_xxs/64x1536/n1/fixture:smollm2-ffn_down.iq2_xxs",
    "mmvq/iq2_xxs/64x1536/n3/fixture:smollm2-ffn_down.iq2_xxs",
    "mmvq/iq2_xxs/64x1536/n8/fixture:smollm2-ffn_down.iq2_xxs",
    "mmvq/iq2_xxs/64x1536/n11/fixture:smollm2-ffn_down.iq2_xxs",
    "mmvq/iq2_xs/64x1536/n1/fixture:smollm2-ffn_down.iq2_xs",
    "mmvq/iq2_xs/64x1536/n3/fixture:smollm2-ffn_down.iq2_xs",
    "mmvq/iq2_xs/64x1536/n8/fixture:smollm2-ffn_down.iq2_xs",
    "mmvq/iq2_xs/64x1536/n11/fixture:smollm2-ffn_down.iq2_xs",
    "mmvq/iq2_s/64x1536/n1/fixture:smollm2-ffn_down.iq2_s",
    "mmvq/iq2_s/64x1536/n3/fixture:smollm2-ffn_down.iq2_s",
    "mmvq/iq2_s/64x1536/n8/fixture:smollm2-ffn_down.iq2_s",
    "mmvq/iq2_s/64x1536/n11/fixture:smollm2-ffn_down.iq2_s",
    "mmvq/iq3_xxs/64x1536/n1/fixture:smollm2-ffn_down.iq3_xxs",
    "mmvq/iq3_xxs/64x1536/n3/fixture:smollm2-ffn_down.iq3_xxs",
    "mmvq/iq3_xxs/64x1536/n8/fixture:smollm2-ffn_down.iq3_xxs",
    "mmvq/iq3_xxs/64x1536/n11/fixture:smollm2-ffn_down.iq3_xxs",
    "mmvq/iq3_s/64x1536/n1/fixture:smollm2-ffn_down.iq3_s",
    "mmvq/iq3_s/64x1536/n3/fixture:smollm2-ffn_down.iq3_s",
    "mmvq/iq3_s/64x1536/n8/fixture:smollm2-ffn_down.iq3_s",
    "mmvq/iq3_s/64x1536/n11/fixture:smollm2-ffn_down.iq3_s",
    "mmvq/iq1_s/64x1536/n1/fixture:smollm2-ffn_down.iq1_s",
    "mmvq/iq1_s/64x1536/n3/fixture:smollm2-ffn_down.iq1_s",
    "mmvq/iq1_s/64x1536/n8/fixture:smollm2-ffn_down.iq1_s",
    "mmvq/iq1_s/64x1536/n11/fixture:smollm2-ffn_down.iq1_s",
    "mmvq/iq1_m/64x1536/n1/fixture:smollm2-ffn_down.iq1_m",
    "mmvq/iq1_m/64x1536/n3/fixture:smollm2-ffn_down.iq1_m",
    "mmvq/iq1_m/64x1536/n8/fixture:smollm2-ffn_down.iq1_m",
    "mmvq/iq1_m/64x1536/n11/fixture:smollm2-ffn_down.iq1_m",
    "mmvq/iq4_nl/64x1536/n1/fixture:smollm2-ffn_down.iq4_nl",
    "mmvq/iq4_nl/64x1536/n3/fixture:smollm2-ffn_down.iq4_nl",
    "mmvq/iq4_nl/64x1536/n8/fixture:smollm2-ffn_down.iq4_nl",
    "mmvq/iq4_nl/64x1536/n11/fixture:smollm2-ffn_down.iq4_nl",
    "mmvq/iq4_xs/64x1536/n1/fixture:smollm2-ffn_down.iq4_xs",
    "mmvq/iq4_xs/64x1536/n3/fixture:smollm2-ffn_down.iq4_xs",
    "mmvq/iq4_xs/64x1536/n8/fixture:smollm2-ffn_down.iq4_xs",
    "mmvq/iq4_xs/64x1536/n11/fixture:smollm2-ffn_down.iq4_xs",
    "mmvq/q8_0/64x1536/n1/fixture:smollm2-ffn_down.q8_0",
    "mmvq/q8_0/64x1536/n3/fixture:smollm2-ffn_down.q8_0",
    "mmvq/q8_0/64x1536/n8/fixture:smollm2-ffn_down.q8_0",
    "mmvq/q8_0/64x1536/n11/fixture:smollm2-ffn_down.q8_0",
    "mmvq/q2_0/64x1536/n1/fixture:smollm2-ffn_down.q8_0",
    "mmvq/q2_0/64x1536/n3/fixture:smollm2-ffn_down.q8_0",
    "mmvq/q2_0/64x1536/n8/fixture:smollm2-ffn_down.q8_0",
    "mmvq/q2_0/64x1536/n11/fixture:smollm2-ffn_down.q8_0",
    "pfgemm/iq2_s/256x1536/n150/fixture:smollm2-ffn_down.iq2_s/groups=0,1,15,16,17,33,64,4",
    "pfgemm/iq4_nl/256x1536/n267/fixture:smollm2-ffn_down.iq4_nl/groups=70,0,3,129,0,16,48,1",
    "q2warp/q2_0/64x1536/n2/fixture:smollm2-ffn_down.q8_0",
]



def test_default_real_weight_cases_unchanged(families):
    names = [c.name for fam in families.values() for c in fam.default_cases() if c.data.startswith("fixture")]
    assert sorted(names) == sorted(SHIPPED_FIXTURE_CASES)
    assert sum(len(list(fam.default_cases())) for fam in families.values()) == 482


def test_hook_per_family_on_a_q8_0_fixture(families):
    ref = FixtureRef("mine", "q8_0", 32, 2048)
    got = {name: [c.name for c in fam.fixture_cases(ref)] for name, fam in families.items()}
    assert got == {
        "dequant": ["dequant/q8_0/32x2048/n1/fixture:mine"],
        "fp16deq": ["fp16deq/q8_0/32x2048/n1/fixture:mine/path=vec16"],
        "grouped": [], "moe_combine": [], "pfgemm": [], "q8_1": [], "swiglu_q8": [],
        "mmvq": [f"mmvq/q8_0/32x2048/n{n}/fixture:mine" for n in (1, 3, 8, 11)],
        "q2warp": ["q2warp/q2_0/32x2048/n2/fixture:mine"],
    }


def test_hook_takes_cols_and_refuses_too_many(families):
    ref = FixtureRef("mine", "iq3_s", 16, 2560)
    assert [c.ncols for c in families["mmvq"].fixture_cases(ref, (2, 5))] == [2, 5]
    assert [c.name for c in families["pfgemm"].fixture_cases(FixtureRef("p", "iq4_nl", 64, 640))] == [
        "pfgemm/iq4_nl/256x640/n267/fixture:p/groups=70,0,3,129,0,16,48,1"]
    with pytest.raises(InputError, match=r"^mmvq: --cols 12: 1 to 11 columns$"):
        families["mmvq"].fixture_cases(ref, (12,))
    assert families["mmvq"].fixture_cases(FixtureRef("k", "q4_k", 64, 1536)) == []


def test_matching_fixtures_globs_each_once():
    refs = matching_fixtures(("smollm2-ffn_down.iq3*", "smollm2-ffn_down.iq3_s"))
    assert [(r.name, r.fmt, r.rows, r.cols) for r in refs] == [
        ("smollm2-ffn_down.iq3_s", "iq3_s", 64, 1536), ("smollm2-ffn_down.iq3_xxs", "iq3_xxs", 64, 1536)]
    with pytest.raises(InputError, match=r"^--fixtures 'nothing\*' matches no fixture in .*\(known: smollm2-"):
        matching_fixtures(("nothing*",))


def test_request_names_untaken_fixture_in_one_line(families):
    lines = []
    req = CaseRequest(fixtures=("smollm2-ffn_down.q4_k", "smollm2-ffn_down.iq4_nl"))
    cases = fixture_request_cases(CaseFilter(("mmvq",)), req, families, lines.append)
    assert lines == ["fixture smollm2-ffn_down.q4_k (q4_k): no selected family takes q4_k (families: mmvq)"]
    assert [c.name for c in cases] == [f"mmvq/iq4_nl/64x1536/n{n}/fixture:smollm2-ffn_down.iq4_nl"
                                       for n in (1, 3, 8, 11)]
    with pytest.raises(InputError, match=r"^no case over the 1 fixture\(s\) passes the filters"):
        fixture_request_cases(CaseFilter(("mmvq",)), CaseRequest(fixtures=("smollm2-ffn_down.q4_k",)), families,
                              lines.append)


def test_fixture_sources_name_file_sha_tensor_rows(families):
    cases = families["dequant"].fixture_cases(FixtureRef("smollm2-ffn_down.iq2_s", "iq2_s", 64, 1536))
    assert fixture_sources(cases + cases) == [describe_source("smollm2-ffn_down.iq2_s")]
    assert describe_source("smollm2-ffn_down.iq2_s") == {
        "fixture": "smollm2-ffn_down.iq2_s", "file": "smollm2-rows.gguf", "sha256": "2fe9f257ef3f",
        "tensor": "ffn_down.iq2_s", "rows": "0:64", "kind": "gguf"}
