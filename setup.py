"""Package data that lives beside the package in a checkout: kernels_src/ and the built-in fixtures/ are
mapped into the wheel as strata_bench/builtin_kernels_src and strata_bench/builtin_fixtures (read-only
there). Everything else is in pyproject.toml."""
from pathlib import Path

from setuptools import find_packages, setup

BUILTIN = {"strata_bench.builtin_kernels_src": "kernels_src", "strata_bench.builtin_fixtures": "fixtures"}
# Each sub-folder is listed as a package of its own, so setuptools neither warns nor drops it.
DATA_PACKAGES = {f"{package}{'.'.join(('', *sub.relative_to(folder).parts))}": sub.as_posix()
                 for package, folder in BUILTIN.items()
                 for sub in [Path(folder), *sorted(p for p in Path(folder).rglob("*") if p.is_dir())]
                 if "__pycache__" not in sub.parts}

setup(
    packages=find_packages(include=["strata_bench", "strata_bench.*"]) + list(DATA_PACKAGES),
    package_dir=DATA_PACKAGES,
    package_data={package: ["*"] for package in DATA_PACKAGES},
)
