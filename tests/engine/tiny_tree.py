"""A tiny stand-in for a llama.cpp tree that CMake really builds on the CPU (no CUDA): a shared library
`ggml` whose `ggml_answer()` returns a number, and the six A/B executables, each printing
"<name> answer <n>". It lays out its outputs as llama.cpp does (every executable and library in
build/bin), so the engine build's targets, workspace, cache and $ORIGIN libraries are exercised."""
from __future__ import annotations

from pathlib import Path

TOOLS = ("llama-bench", "llama-completion", "llama-perplexity", "llama-quantize", "llama-imatrix", "llama-server")

ROOT_CMAKE = """cmake_minimum_required(VERSION 3.14)
project("llama.cpp" C)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
set(CMAKE_LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
add_subdirectory(ggml)
add_subdirectory(tools)
"""


def write_tiny_tree(root: Path, answer: int = 1, tools=TOOLS, fake: tuple[str, str] | None = None) -> Path:
    """Write the tree at `root` (returned); `answer` is what ggml_answer() returns. With `fake` (python, script),
    each executable runs `python script <tool> ARGS...` instead (tests/engine/llama-fake.py: llama-bench runs its
    `bench`), and mmvq.cu holds the lines scripts/engine_plant.py changes."""
    files = {
        "CMakeLists.txt": ROOT_CMAKE,
        "ggml/CMakeLists.txt": "add_library(ggml SHARED src/ggml.c)\n"
                               "target_include_directories(ggml PUBLIC include)\n",
        "ggml/include/ggml.h": "int ggml_answer(void);\n",
        "ggml/src/ggml.c": f'#include "ggml.h"\nint ggml_answer(void) {{ return {answer}; }}\n',
        "ggml/src/ggml-cuda/mmvq.cu": "// not compiled by the tiny tree\n",
        "tools/CMakeLists.txt": "".join(f"add_subdirectory({t.removeprefix('llama-')})\n" for t in tools),
        "docs/build.md": "not a build file\n",
    }
    for tool in tools:
        short = tool.removeprefix("llama-")
        files[f"tools/{short}/CMakeLists.txt"] = (f"set(TARGET {tool})\nadd_executable(${{TARGET}} main.c)\n"
                                                  f"target_link_libraries(${{TARGET}} PRIVATE ggml)\n")
        files[f"tools/{short}/main.c"] = (f'#include <stdio.h>\n#include "ggml.h"\n'
                                          f'int main(void) {{ printf("{tool} answer %d\\n", ggml_answer()); '
                                          f'return 0; }}\n')
    if fake is not None:
        for tool in tools:
            files[f"tools/{tool.removeprefix('llama-')}/main.c"] = _exec_main(*fake, FAKE_TOOL.get(tool, "bench"))
        files["ggml/src/ggml-cuda/mmvq.cu"] = ("static constexpr __device__ vec_dot_q_cuda_t get_vec_dot_q_cuda(int t) {\n"
                                               "        case GGML_TYPE_IQ4_XS:  return vec_dot_iq4_xs_q8_1;\n}\n\n"
                                               "static void mul_mat_vec_q_switch_type(int x) {}\n\n"
                                               "void ggml_cuda_mul_mat_vec_q(int x) { mul_mat_vec_q_switch_type(x); }\n")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


FAKE_TOOL = {"llama-bench": "bench", "llama-perplexity": "perplexity", "llama-server": "server",
             "llama-quantize": "quantize", "llama-imatrix": "imatrix"}


def _exec_main(python: str, script: str, tool: str) -> str:
    return (f'#include <stdlib.h>\n#include <unistd.h>\n#include "ggml.h"\n'
            f'int main(int argc, char ** argv) {{\n'
            f'    char ** args = calloc(argc + 3, sizeof(char *));\n'
            f'    args[0] = "{python}"; args[1] = "{script}"; args[2] = "{tool}";\n'
            f'    for (int i = 1; i < argc; i++) args[i + 2] = argv[i];\n'
            f'    (void) ggml_answer();\n'
            f'    execv(args[0], args);\n    return 127;\n}}\n')
