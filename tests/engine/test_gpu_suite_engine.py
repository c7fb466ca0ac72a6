"""`scripts/gpu_suite.sh engine` end to end on the CPU: a tiny CMake tree whose executables run the fake
llama.cpp (tests/engine/llama-fake.py) stands in for llama.cpp, so every step's plumbing (builds of the tree
and its two planted copies, requantization, imatrix, the seven A/Bs and their hand-over of paths) runs as
it will on the GPU host. The fake cannot see the plants: verdicts are not checked here, only that each
step ran and said what it should."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.tiny_tree import write_tiny_tree

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "engine" / "llama-fake.py"


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("cc")), reason="cmake or a C compiler is missing")
def test_the_engine_step_builds_three_trees_and_runs_every_ab(tmp_path):
    repo = tmp_path / "repo"
    for rel in ("scripts/gpu_suite.sh", "scripts/engine_plant.py", "scripts/engine_noise.py",
                "examples/engine/calibration.txt"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, repo / rel)
    (repo / "strata_bench").symlink_to(ROOT / "strata_bench")
    tree = write_tiny_tree(tmp_path / "llama", fake=(sys.executable, str(FAKE)))
    model = tmp_path / "gemma.gguf"
    model.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(64))
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    (tmp_path / "cuda" / "include").mkdir()
    (tmp_path / "cuda" / "include" / "cublas_v2.h").write_text("/* cuBLAS */\n")
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    nvcc.chmod(0o755)
    shutil.rmtree("/tmp/strata-engine", ignore_errors=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "OUT": str(tmp_path / "out"),
           "STRATA_ENGINE_TREE": str(tree), "STRATA_ENGINE_MODEL": str(model), "CUDACXX": str(nvcc),
           "FAKE_NOISE_PCT": "0.05"}
    done = subprocess.run(["bash", "scripts/gpu_suite.sh", "engine"], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=900)
    status = {line.split()[0]: line.split()[1] for line in done.stdout.splitlines()
              if len(line.split()) > 1 and line.split()[1].startswith("rc=")}
    assert status == {
        "engine-build-a": "rc=0", "engine-build-slow": "rc=0", "engine-build-ulp": "rc=0",
        "engine-quantize-iq4_xs": "rc=0", "engine-quantize-q8_0": "rc=0", "engine-quantize-iq3_s": "rc=0",
        "engine-imatrix": "rc=0", "engine-quantize-iq2_xxs": "rc=0", "engine-aa-speed": "rc=0",
        "engine-aa-tokens": "rc=0", "engine-aa-logits": "rc=0", "engine-slow-speed": "rc=0",
        "engine-slow-tokens": "rc=0", "engine-ulp-tokens": "rc=0", "engine-ulp-logits": "rc=0",
        "engine-env-fusion": "rc=0", "engine-noise": "rc=0"}, done.stdout + done.stderr
    logs = next((repo / "results" / "logs").iterdir())
    assert "| avg_ts[tg128] (t/s, higher) |" in (logs / "engine-aa-speed.log").read_text()
    assert "| tokens |" in (logs / "engine-slow-tokens.log").read_text()
    assert "| kld |" in (logs / "engine-ulp-logits.log").read_text()
    assert "planted slow-mmvq" in (logs / "engine-plant-slow.log").read_text()


@pytest.mark.slow
def test_carried_builds_run_every_ab_and_build_nothing(tmp_path):
    """Builds made on another host travel as .engine/engines.tar.xz.partNN (scripts/engine_carry.py, split over
    calls): the step unpacks them, keeps their build records, and runs the A/Bs on them with no build of its own;
    a model requantized elsewhere, carried in parts, is joined and used with no quantization here."""
    repo = tmp_path / "repo"
    for rel in ("scripts/gpu_suite.sh", "scripts/engine_plant.py", "scripts/engine_carry.py",
                "scripts/engine_noise.py", "examples/engine/calibration.txt"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, repo / rel)
    (repo / "strata_bench").symlink_to(ROOT / "strata_bench")
    bins = tmp_path / "bins"
    for arm in ("a", "slow", "ulp"):
        for tool in FAKE_TOOLS:
            exe = bins / arm / tool
            exe.parent.mkdir(parents=True, exist_ok=True)
            exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" {FAKE_TOOLS[tool]} "$@"\n')
            exe.chmod(0o755)
    records = tmp_path / "builds.json"
    records.write_text('[{"arm": "a"}]\n')
    subprocess.run([sys.executable, "scripts/engine_carry.py", "pack", ".engine", *(f"{a}={bins / a}" for a in
                    ("a", "slow", "ulp")), "--records", str(records), "--part-mib", "0.0004"], cwd=repo, check=True)
    assert len(list((repo / ".engine").glob("engines.tar.xz.part*"))) > 1
    model = b"GGUF\x03\x00\x00\x00" + bytes(64)  # requantized elsewhere, carried in two parts
    (repo / ".models").mkdir()
    (repo / ".models" / "gemma-3-270m-iq4_xs.gguf.part00").write_bytes(model[:40])
    (repo / ".models" / "gemma-3-270m-iq4_xs.gguf.part01").write_bytes(model[40:])
    shutil.rmtree("/tmp/strata-engine", ignore_errors=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "OUT": str(tmp_path / "out"),
           "STRATA_ENGINE_PAIRS": "2", "FAKE_NOISE_PCT": "0.05"}
    done = subprocess.run(["bash", "scripts/gpu_suite.sh", "engine-ab"], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=900)
    status = {line.split()[0]: line.split()[1] for line in done.stdout.splitlines()
              if len(line.split()) > 1 and line.split()[1].startswith("rc=")}
    assert not [name for name in status if name.startswith("engine-build")], done.stdout
    assert set(status.values()) == {"rc=0"} and len(status) == 9, done.stdout + done.stderr
    assert not [name for name in status if "quantize" in name or "imatrix" in name]
    assert "engine-quantize          carried: .models/gemma-3-270m-iq4_xs.gguf (sha256 " in done.stdout
    assert Path("/tmp/strata-engine/iq4_xs.gguf").read_bytes() == model
    assert "engine-build             carried builds: MANIFEST.json a builds.json slow ulp" in done.stdout
    logs = next((repo / "results" / "logs").iterdir())
    assert (logs / "engine-builds.json").read_text() == '[{"arm": "a"}]\n'
    assert "| avg_ts[tg128] (t/s, higher) |" in (logs / "engine-slow-speed.log").read_text()
    assert "| median_ts[pp1024] (t/s, higher) |" in (logs / "engine-aa-speed.log").read_text()
    assert "| threads4 | pp4096 | 5 | " in (logs / "engine-noise.log").read_text()
    assert (logs / "engine-noise.json").exists()


FAKE_TOOLS = {"llama-bench": "bench", "llama-perplexity": "perplexity", "llama-server": "server",
              "llama-quantize": "quantize", "llama-imatrix": "imatrix"}
