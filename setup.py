"""Package data that lives beside the package in a checkout: kernels_src/ and the built-in fixtures/ are
mapped into the wheel as strata_bench/builtin_kernels_src and strata_bench/builtin_fixtures (read-only
there). Everything else is in pyproject.toml."""
from setuptools import find_packages, setup

BUILTIN = {"strata_bench.builtin_kernels_src": "kernels_src", "strata_bench.builtin_fixtures": "fixtures"}

setup(
    packages=find_packages(include=["strata_bench", "strata_bench.*"]) + list(BUILTIN),
    package_dir=BUILTIN,
    package_data={name: ["**/*"] for name in BUILTIN},
)
