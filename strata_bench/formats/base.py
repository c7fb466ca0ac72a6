"""The format base class and its registry: a QuantFormat subclass with a name registers itself in
FORMATS when its class statement runs (strata_bench/formats/__init__.py imports the built-in modules)."""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from strata_bench.errors import InputError, RegistryError

FORMATS: dict[str, "QuantFormat"] = {}


def _origin(cls: type) -> tuple[str, str]:
    # The same class statement run again (a module reloaded) may re-register its own name.
    return cls.__module__, cls.__qualname__


def _refuse_inherited_name(cls: type) -> None:
    """A subclass of a registered format that names no format of its own would share its parent's name."""
    for base in cls.__mro__[1:]:
        inherited = base.__dict__.get("name")
        if isinstance(inherited, str) and FORMATS.get(inherited) is not None and type(FORMATS[inherited]) is base:
            raise RegistryError(f"format class {cls.__qualname__} inherits the name {inherited!r} of "
                                f"{base.__qualname__}: pass its own name= (and geometry) in the class statement")


class QuantFormat:
    name: ClassVar[str]
    block_size: ClassVar[int]  # values per block
    type_size: ClassVar[int]  # bytes per block
    qtype: ClassVar[object | None]  # gguf.GGMLQuantizationType, or None (the project's own formats)

    def __init_subclass__(cls, *, name: str | None = None, block_size: int = 0, type_size: int = 0,
                          qtype: object | None = None, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if name is None:
            _refuse_inherited_name(cls)
            return
        held = FORMATS.get(name)
        if held is not None and _origin(type(held)) != _origin(cls):
            raise RegistryError(f"format name {name!r} is taken: {type(held).__module__}.{type(held).__qualname__} "
                                f"holds it, {cls.__module__}.{cls.__qualname__} cannot register it too")
        cls.name, cls.block_size, cls.type_size, cls.qtype = name, block_size, type_size, qtype
        FORMATS[name] = cls()

    # --- geometry -----------------------------------------------------------------------------
    def bytes_per_row(self, cols: int) -> int:
        if cols <= 0 or cols % self.block_size:
            raise InputError(f"row length {cols} is not a multiple of {self.name}'s block size {self.block_size}")
        return cols // self.block_size * self.type_size

    def blocks(self, raw: np.ndarray) -> np.ndarray:
        """View raw bytes (..., n*type_size) as (n_blocks, type_size)."""
        return np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1, self.type_size)

    # --- values -------------------------------------------------------------------------------
    def dequantize(self, raw: np.ndarray) -> np.ndarray:
        """float32 (..., cols) from uint8 (..., bytes_per_row): gguf-py's result (the oracle)."""
        raise NotImplementedError

    def dequantize_f64(self, raw: np.ndarray) -> np.ndarray:
        """The exact values in float64 (no float32 rounding of scale products)."""
        raise NotImplementedError

    # --- generators ---------------------------------------------------------------------------
    def random_blocks(self, rng: np.random.Generator, n_blocks: int) -> np.ndarray:
        """Seeded valid blocks (n_blocks, type_size) uint8: random codes, small finite scales."""
        raise NotImplementedError

    def edge_blocks(self, rng: np.random.Generator) -> np.ndarray:
        """Edge-case blocks: zero, fp16-subnormal and largest finite scales, codes at extremes."""
        raise NotImplementedError

    # --- optional -----------------------------------------------------------------------------
    def quantize(self, values: np.ndarray) -> np.ndarray:
        """uint8 (..., bytes_per_row) from float32 (..., cols), where a Python quantizer exists."""
        raise InputError(f"no Python quantizer for {self.name} (gguf-py has none); "
                         "i-quants and K-quants come from `strata-bench fixtures requantize`")

    def can_quantize(self) -> bool:
        return type(self).quantize is not QuantFormat.quantize

    def describe_block(self, raw_block: np.ndarray, n_values: int = 8) -> str:
        """One line decoding a block (scale fields, largest |value|, first values) for diagnosis."""
        return f"{self.name} block {bytes(self.blocks(raw_block)[0]).hex()}"
