"""The Family contract: what a kernel family declares so parity, bench and ab can run it.

A family is a class with a unique `name`, the kernel sources it compiles, how a case's inputs are built,
the outputs its variants write, its float64 references, and a table of variants. A variant is data
(`Variant`): a name, the kernel name expressions it compiles from each source, and its launch. Adding a
variant is one entry in `variants`; nothing dispatches on variant names.

Lifecycle per case: host = make_inputs(case) (numpy, deterministic from the case);
dev = to_device(case, host) (cupy); outs = alloc_outputs(case, dev); launch(case, variant, ...) fills
outs; reference(case, host) gives the Expected values the outputs are checked against.

A subclass with a `name` registers itself when its class statement runs (cases/registry.py); a subclass
must set its own `name` (inheriting the parent's is refused) and a name belongs to one class.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Mapping, Sequence

from strata_bench.cases.case import Case, Expected
from strata_bench.errors import InputError

if TYPE_CHECKING:
    from strata_bench.toml_abi.abi import LaunchAbi
    from strata_bench.cases.fixtures import FixtureRef

# (family, source) -> the name expressions a variant compiles from that source ([] for one it does not use).
KernelsOf = Callable[["Family", str], Sequence[str]]
# (family, case, kernels, dev, outs, stream) -> None; must only enqueue work (bench captures it in a graph).
LaunchFn = Callable[..., None]


@dataclass(frozen=True)
class Variant:
    """One registered way of running a family's cases.

    `kernels(family, source)` lists the kernel name expressions (template instances) the variant launches
    from one of the family's sources, and `launch(family, case, kernels, dev, outs, stream)` enqueues
    them. The first variant a case lists is its baseline.
    """

    name: str
    kernels: KernelsOf
    launch: LaunchFn
    description: str = ""
    # case -> whether the variant runs it (a TOML variant whose kernel exists for some formats or column
    # counts only); None: every case of the family.
    applies: Callable[[Case], bool] | None = None
    # How its float64 error is judged where it is not bitwise equal to the baseline (cases/error_model.py, the
    # protocol: a TOML variant's, llama.cpp's); None: bitwise equal to the baseline, within the family's bounds.
    error_model: Any = None
    # The formats it runs (a foreign engine's kernels cover formats the built-ins lack: the family then
    # makes cases of those formats for it alone); None: the family's own formats (`Family.own_formats`).
    formats: tuple[str, ...] | None = None
    # (family, case, dev) -> extra device inputs it alone needs, made once per device copy with the
    # family's own (a foreign kernel's weight layout: rows packed at whole blocks, one more readable row),
    # so bench's rotated copies hold them too; None: nothing extra.
    prepare: Callable[..., Mapping[str, Any]] | None = None
    # The variant it must equal bit for bit where a case runs both (a user's branch of an engine against
    # the engine: ggml_b against ggml), whatever its error model; None: the case's baseline.
    same_as: str | None = None
    # Outputs (and derived outputs, as Expected names them) it does not compute: an engine's graph that never
    # forms an intermediate the built-ins write. No check reads them for it: not written, finite, bitwise or
    # float64; the others it writes are checked as any variant's.
    omits: tuple[str, ...] = ()


class Family(ABC):
    """A kernel family. Subclasses with a `name` register themselves when defined.

    Required: default_cases, make_inputs, to_device, alloc_outputs, reference, and a `variants` table
    (or, for a family written before the table existed, its own `launch` and `name_expressions`).
    Every optional hook below has a default that suits a plain elementwise family.
    """

    name: ClassVar[str] = ""
    sources: ClassVar[tuple[str, ...]] = ()  # files in kernels_src/ (or the family's kernels_root) it compiles
    description: ClassVar[str] = ""
    variants: ClassVar[tuple[Variant, ...]] = ()  # the variant table; see Variant
    # The measured ceiling that bounds the kernels, the one bench shows a fraction of: "read" where they
    # read far more than they write (a mat-vec), "copy" where they write a real share of what they move
    # (a dequantization, a quantization: the copy ceiling counts read + written bytes), None where no
    # bandwidth bounds them (a prompt GEMM: TFLOP/s).
    ceiling: ClassVar[str | None] = "read"
    # Directory the sources are read from (a user family's --kernels DIR); None: kernels_src/.
    kernels_root: Path | None = None
    # The formats its built-in variants run; None: every case the family makes (a family without quant
    # formats, or one whose variants all run every format). A variant declaring `formats` adds others.
    own_formats: ClassVar[tuple[str, ...] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        from strata_bench.cases.registry import register_family

        register_family(cls)

    # --- required ---------------------------------------------------------------------------------
    @abstractmethod
    def default_cases(self) -> Iterable[Case]:
        """The cases `strata-bench parity` runs with no filter."""

    @abstractmethod
    def make_inputs(self, case: Case) -> dict[str, Any]:
        """Host inputs (numpy) built deterministically from the case (fixture or seed)."""

    @abstractmethod
    def to_device(self, case: Case, host: Mapping[str, Any]) -> dict[str, Any]:
        """Copy host inputs to the current device (cupy)."""

    @abstractmethod
    def alloc_outputs(self, case: Case, dev: Mapping[str, Any]) -> dict[str, Any]:
        """Allocate every output a variant writes (cupy arrays; the engine poisons them)."""

    @abstractmethod
    def reference(self, case: Case, host: Mapping[str, Any]) -> list[Expected]:
        """Float64 references with tolerances derived from the kernels' arithmetic contract."""

    # --- variants and kernels -----------------------------------------------------------------------
    @property
    def default_variants(self) -> tuple[str, ...]:
        """The variant names `case()` gives a case: every entry of the table, in order (the first is the
        baseline)."""
        return tuple(v.name for v in self.variants)

    def variant(self, name: str) -> Variant:
        """The table entry named `name`; an InputError naming the known variants if there is none."""
        for v in self.variants:
            if v.name == name:
                return v
        known = ", ".join(v.name for v in self.variants)
        raise InputError(f"{self.name}: unknown variant {name!r} ({known})")

    def omitted(self, variant: str) -> tuple[str, ...]:
        """The outputs `variant` does not compute (Variant.omits); none for a family without a table."""
        return next((v.omits for v in self.variants if v.name == variant), ())

    def family_kernels(self, source: str) -> list[str]:
        """Kernels every variant launches (e.g. quantize_q8_1 before a mat-vec), from one source.
        Default: none."""
        return []

    def name_expressions(self, source: str) -> list[str]:
        """Every kernel to compile from one source: the family-wide kernels, then each variant's, in
        table order, each once. A source a run added (a TOML or --ggml variant's, add_source) is asked of the
        variants added with it only: a built-in variant's `kernels` may ignore its argument (swiglu_q8's
        named swiglu_h_f32 from ggml's unary.cu), and its kernels live in the family's own sources."""
        own = source in type(self).sources
        names = list(self.family_kernels(source)) if own else []
        for v in self.variants:
            if own or v not in type(self).variants:
                names += v.kernels(self, source)
        return list(dict.fromkeys(names))

    def launch_abi(self) -> "LaunchAbi | None":
        """The launch ABI a variant declared in TOML follows (toml_abi/abi.py, docs/ABI.md): argument names,
        case fields, name placeholders. Default None: the family takes no TOML variants."""
        return None

    def source_options(self, source: str) -> tuple[str, ...]:
        """Extra NVRTC options for one source (a TOML variant's include dirs and defines). Default: none."""
        return self.__dict__.get("_source_options", {}).get(source, ())

    def source_build(self, source: str) -> Any:
        """How a TOML variant's source is built (kernels/variant_build.py SourceBuild: NVRTC, nvcc or a
        prebuilt binary); None for the family's own sources, which NVRTC compiles with source_options."""
        return self.__dict__.get("_source_builds", {}).get(source)

    def add_variant(self, variant: Variant, source: str | None = None, options: tuple[str, ...] = (),
                    build: Any = None) -> None:
        """Append a variant to this instance's table (a TOML variant), with the source it compiles from,
        that source's options and its build (SourceBuild); InputError when the table already has its name."""
        if any(v.name == variant.name for v in self.variants):
            raise InputError(f"{self.name} already has a variant named {variant.name!r} "
                             f"({', '.join(v.name for v in self.variants)})")
        self.variants = (*self.variants, variant)
        if source is not None:
            self.add_source(source, options, build)

    def add_source(self, source: str, options: tuple[str, ...] = (), build: Any = None) -> None:
        """One more source this instance compiles (a variant whose kernels live in several files), with its
        options and its build (SourceBuild); the variants say which kernels each holds."""
        if source not in self.sources:
            self.sources = (*self.sources, source)
        self.__dict__.setdefault("_source_options", {})[source] = tuple(options)
        if build is not None:
            self.__dict__.setdefault("_source_builds", {})[source] = build

    def copy(self) -> "Family":
        """This family for one run's catalog: the same instance state, its own variant table and source maps,
        so a variant a run adds (add_variant) stays in that run."""
        import copy

        twin = copy.copy(self)
        for key, value in self.__dict__.items():
            if isinstance(value, dict):  # add_variant's and TOML's maps (a cache copied so is shared, as before)
                twin.__dict__[key] = dict(value)
        return twin

    def launch(self, case: Case, variant: str, kernels: Any, dev: Mapping[str, Any],
               outs: Mapping[str, Any], stream: Any = None) -> None:
        """Launch one variant (looked up in the table). Must only enqueue work, so bench can capture it
        in a CUDA graph."""
        self.variant(variant).launch(self, case, kernels, dev, outs, stream)

    def case(self, fmt: str, rows: int, cols: int, ncols: int = 1, data: str = "seed:1",
             variants: tuple[str, ...] | None = None, **params: Any) -> Case:
        """A case of this family: its name filled in, its default variants unless `variants` is given,
        and `params` (family-specific knobs) in the order given (they are part of the case's name)."""
        chosen = self.default_variants if variants is None else tuple(variants)
        if self.variants:
            for name in chosen:
                self.variant(name)  # an unknown name is an InputError now, not at launch
        case = Case(self.name, fmt, rows, cols, ncols, data, chosen, tuple(params.items()))
        if variants is None and self.variants:
            runs = tuple(n for n in chosen if self.runs(self.variant(n), case))
            case = Case(self.name, fmt, rows, cols, ncols, data, runs, case.params)
        return case

    def runs(self, variant: Variant, case: Case) -> bool:
        """Whether `variant` runs `case`: its format among the variant's (`Variant.formats`, else the
        family's own) and its `applies` test, if any."""
        formats = variant.formats if variant.formats is not None else self.own_formats
        if formats is not None and case.fmt not in formats:
            return False
        return variant.applies is None or variant.applies(case)

    def foreign_formats(self) -> tuple[str, ...]:
        """Formats some variant declares that the family's own variants lack, in table order: the family
        makes cases of these for those variants alone."""
        own = self.own_formats or ()
        found = [f for v in self.variants for f in (v.formats or ()) if f not in own]
        return tuple(dict.fromkeys(found))

    def device_inputs(self, case: Case, host: Mapping[str, Any]) -> dict[str, Any]:
        """`to_device`, then what each of the case's variants prepares for itself (Variant.prepare): the
        one way a run puts a case's inputs on the device."""
        dev = self.to_device(case, host)
        for name in case.variants:
            prepare = self.variant(name).prepare if self.variants else None
            if prepare is not None:
                dev.update(prepare(self, case, dev))
        return dev

    # --- optional hooks -----------------------------------------------------------------------------
    def bench_cases(self) -> Iterable[Case]:
        """The cases `strata-bench bench` times with no filter (default: the seeded parity cases)."""
        return [c for c in self.default_cases() if c.data.startswith("seed")]

    def fixture_cases(self, fixture: "FixtureRef", ncols: tuple[int, ...] | None = None,
                      fmt: str | None = None) -> list[Case]:
        """The family's cases over a fixture's real rows (--fixtures, --gguf, the shipped fixtures).

        The fixture gives the rows and inputs per row; `ncols` is --cols (None: the family's defaults),
        for families whose cases have columns, entries or tokens. `fmt` asks for cases in another format
        the family converts the rows to (q2_0 from q8_0 rows); None: the fixture's own format. Return []
        for a fixture the family cannot take. Default: [] (a family without real-weight cases)."""
        return []

    def compared_outputs(self, case: Case) -> tuple[str, ...] | None:
        """Outputs compared bitwise between variants (default None: all of them)."""
        return None

    def related_cases(self, case: Case) -> list[tuple[Case, str, Any]]:
        """Extra bitwise checks: (other case, its output, a function mapping this case's outputs
        to the slice that must equal it). mmvq uses it for 'every column equals the 1-column call'.
        Default: none."""
        return []

    def output_values(self, case: Case, name: str, outputs: Mapping[str, Any]) -> Any:
        """Values an Expected named `name` is checked against, read as float64 (a float or integer
        array is widened by the check as it reads it, exactly as a float64 copy would be). Default: that
        output as it is; a family overrides it for derived values (q8_1 bytes decoded, a hi+lo fp16 pair
        summed)."""
        return outputs[name]

    def written_mask(self, case: Case, output: str) -> Any:
        """Bool mask of the elements a variant must write (default None: all). Elements outside it
        (padding) must stay unwritten: a kernel that writes into padding fails too."""
        return None

    def allows_nonfinite(self, case: Case, output: str) -> bool:
        """True where an output may hold inf or NaN on purpose (checked against the reference instead of
        failing the finite check). Default False."""
        return False

    def errors_must_match(self, case: Case) -> bool:
        """True where variants cannot be bitwise equal but must have the same max |err| against every
        float64 reference (e.g. tensor-core GEMMs with the same fp16 inputs and k order). Default False."""
        return False

    def describe_index(self, case: Case, output: str, index: tuple[int, ...]) -> str:
        """Name an output element for a diagnosis (e.g. 'row 17, column 2, block 3').
        Default: 'index i,j'."""
        return "index " + ",".join(str(i) for i in index)

    def bytes_moved(self, case: Case) -> int:
        """Bytes the kernel must move through memory (quantized weights + activations + outputs), for GB/s.
        Default 0 (no bandwidth figure)."""
        return 0

    def flops(self, case: Case) -> int:
        """Arithmetic operations of one call, for a TFLOP/s figure. Default 0 (none)."""
        return 0

    def weights_read(self, case: Case) -> int:
        """The weight elements one call reads (bench --profile's instructions per weight divide by it). Default
        rows x cols, one matrix."""
        return case.rows * case.cols
