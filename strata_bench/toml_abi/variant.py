"""Kernel variants declared in TOML (--variants FILE.toml): a kernel that follows a family's launch ABI
(toml_abi/abi.py, docs/ABI.md) joins that family's variant table with no Python, and then gets every check
a built-in variant gets.

    [[variant]]
    family = "mmvq"
    name = "row8"
    sources = ["mmvq_row8.cu"]          # relative to the TOML file; one translation unit
    include_dirs = []                   # relative to the TOML file (kernels_src is always on the path)
    defines = { ROW8_WARPS = 8 }
    kernel = "mmvq_row8<{traits}>"      # placeholders from the ABI
    grid = ["ceil_div(rows, 8)"]        # 1 to 3 expressions over the ABI's case fields
    block = [256]
    shared = 0                          # dynamic shared memory, bytes
    args = ["w", "stride", "rows", "nchunks", "xq", "ncols", "y"]

A variant of several kernels declares them in order as [[variant.launch]] tables, each with kernel,
grid, block, shared (optional) and args, instead of those keys in the [[variant]] table itself.

Optional keys (docs/ABI.md): compiler = "nvcc" with flags (or flags for NVRTC, which may set the float
options), binary = "x.cubin" in place of sources, argument tables and [struct.NAME] types
(toml_abi/args.py), [variant.placeholders] rules (toml_abi/placeholders.py) and [variant.error]
(toml_abi/error_model.py).

Every error (a TOML syntax error, an unknown family, key or argument, an expression over an unknown
field, a missing source) is one InputError naming the file and the key.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from strata_bench.toml_abi.abi import LaunchAbi
from strata_bench.toml_abi.abi_check import check_params
from strata_bench.toml_abi.c_types import CType
from strata_bench.toml_abi.error_model import TomlErrorModel, parse_error_model
from strata_bench.toml_abi.args import parse_structs
from strata_bench.toml_abi.placeholders import PlaceholderRule, name_sets, names_for, parse_rules
from strata_bench.toml_abi.launch import LAUNCH_KEYS, LAUNCH_REQUIRED, TomlLaunch, parse_launch
from strata_bench.errors import InputError
from strata_bench.files import read_regular
from strata_bench.kernels.source_scan import declared_kernels, mentions
from strata_bench.kernels.sources import kernels_dir, kernels_src_hash
from strata_bench.kernels.variant_build import COMPILERS, SourceBuild

REQUIRED = ("family", "name", "sources", "kernel", "grid", "block", "args")
# nvcc's and NVRTC's options that choose what architecture the code is built for.
ARCH_OPTIONS = frozenset(("-arch", "--gpu-architecture", "-gencode", "--generate-code", "-code", "--gpu-code"))
OPTIONAL = ("include_dirs", "defines", "shared", "description", "launch", "compiler", "flags", "binary",
            "placeholders", "error")
_HASHED_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".inc")
MAX_WALKED = 100_000  # entries under a variant's source folder and include_dirs: header folders, not a disk
MAX_HASHED_BYTES = 256 << 20  # each source or header hashed (read whole)


@dataclass(frozen=True)
class TomlVariant:
    """One [[variant]] table, checked: paths resolved, launches parsed against the family's ABI."""

    file: Path
    family: str
    name: str
    source: Path
    include_dirs: tuple[Path, ...]
    defines: tuple[tuple[str, str], ...]
    launches: tuple[TomlLaunch, ...]
    description: str = ""
    compiler: str = "nvrtc"  # "nvrtc" (the default), "nvcc", or "binary" (`source` is a prebuilt cubin/fatbin)
    flags: tuple[str, ...] = ()  # the compiler's own options, as given (NVRTC's or nvcc's)
    rules: tuple[PlaceholderRule, ...] = ()  # its own placeholders ([variant.placeholders])
    error_model: TomlErrorModel | None = None  # [variant.error]: judged by its own bound, not bitwise

    # The first launch's keys (a one-launch variant's, as its table spells them).
    kernel = property(lambda self: self.launches[0].kernel)
    grid = property(lambda self: self.launches[0].grid)
    block = property(lambda self: self.launches[0].block)
    shared = property(lambda self: self.launches[0].shared)
    args = property(lambda self: self.launches[0].args)

    def options(self) -> tuple[str, ...]:
        """The compiler options of the variant's source. NVRTC: its folder and include dirs, its defines,
        a hash of every header it can see (so an edit to any of them is a new compile: the cubin cache
        keys on the options), then its flags. nvcc: its flags first, as an engine's build gives them,
        then its folder, include dirs and kernels_src (-I) and its defines (nvcc's cache key hashes the
        headers itself)."""
        dirs = (self.source.parent, *self.include_dirs)
        defines = tuple(f"-D{k}={v}" if v != "" else f"-D{k}" for k, v in self.defines)
        if self.compiler == "nvcc":
            return (*self.flags, *(f"-I{d}" for d in (*dirs, kernels_dir())), *defines)
        if self.compiler == "binary":
            return ()
        return (*(f"-I{d}" for d in dirs), *defines, f"-DSTRATA_VARIANT_HASH=0x{self.source_hash()[:15]}",
                *self.flags)

    @property
    def where(self) -> str:
        return f"{self.file}: variant {self.name!r}"

    def build(self, abi: LaunchAbi | None = None) -> SourceBuild:
        """How the family compiles this variant's source (kernels/variant_build.py); with the family's
        `abi`, every kernel compiled is checked against the declared arguments (toml_abi/abi_check.py)."""
        inputs = "" if self.compiler != "nvcc" else self.source_hash() + kernels_src_hash()
        check = None if abi is None else self._checker(abi)
        return SourceBuild(self.compiler, self.source, self.where, self.options(), inputs, check)

    def _checker(self, abi: LaunchAbi):
        """expr, cubin kernel -> None: the launches naming `expr` checked against its parameter table."""
        multi = len(self.launches) > 1
        expressions = [{launch.kernel.format(**names) for names in name_sets(self.rules, abi)}
                       for launch in self.launches]

        def check(expr: str, kernel) -> None:
            for i, launch in enumerate(self.launches):
                if expr in expressions[i] and launch.params:
                    where = f"{self.where}: " + (f"launch[{i}]." if multi else "")
                    check_params(kernel, [p.ctype for p in launch.params], launch.args, where, expr)

        return check

    def names_for(self, abi: LaunchAbi, case: Any) -> Mapping[str, str] | None:
        """The case's placeholder values, None where the variant does not run the case (a rule without a
        value for it)."""
        return names_for(self.rules, abi, case)

    def source_hash(self) -> str:
        digest = hashlib.sha256(read_regular(self.source, f"{self.where}: {self.source}", MAX_HASHED_BYTES))
        for folder in (self.source.parent, *self.include_dirs):
            for path in _headers(folder, self.where):
                data = read_regular(path, f"{self.where}: {path}", MAX_HASHED_BYTES)
                digest.update(str(path.relative_to(folder)).encode() + b"\0" + data)
        return digest.hexdigest()


def _headers(folder: Path, where: str) -> list[Path]:
    """The source-like files under `folder`, sorted; InputError for a folder too large to be one of
    headers (include_dirs = ["/"] walked every file system) or one that cannot be listed."""
    found: list[Path] = []
    seen = 0

    def refuse(exc: OSError) -> None:
        raise InputError(f"{where}: include folder {folder}: {exc.strerror or exc} ({exc.filename})")

    for top, dirs, files in os.walk(folder, onerror=refuse):  # links to folders are not followed
        seen += len(dirs) + len(files)
        if seen > MAX_WALKED:
            raise InputError(f"{where}: include folder {folder} holds more than {MAX_WALKED} entries: name the "
                             "folder of the headers")
        found += [Path(top, f) for f in files if Path(f).suffix in _HASHED_SUFFIXES]
    return sorted(p for p in found if p.is_file())  # a FIFO or a socket is not a header


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    if not path.is_file():
        raise InputError(f"--variants {path}: no such file")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: TOML syntax error: {exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text file") from None


def parse_variant_file(path: str | Path, families: Mapping[str, Any]) -> list[TomlVariant]:
    """Every [[variant]] of a TOML file, checked against its family's ABI."""
    path = Path(path)
    doc = _load_toml(path)
    extra = sorted(set(doc) - {"variant", "struct"})
    if extra:
        raise InputError(f"{path}: unknown key {extra[0]!r} (a variants file holds [[variant]] and [struct.NAME] "
                         "tables)")
    tables = doc.get("variant")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise InputError(f"{path}: no [[variant]] table")
    structs = parse_structs(doc, str(path))
    parsed = [_parse_table(path, i, table, families, structs) for i, table in enumerate(tables)]
    names = [(v.family, v.name) for v in parsed]
    for key in names:
        if names.count(key) > 1:
            raise InputError(f"{path}: variant {key[1]!r} of {key[0]} is declared twice")
    return parsed


def _where(path: Path, index: int, table: Mapping[str, Any], key: str) -> str:
    name = table.get("name")
    label = f"variant {name!r}" if isinstance(name, str) else f"variant[{index}]"
    return f"{path}: {label}: {key}"


def _parse_table(path: Path, index: int, table: Mapping[str, Any], families: Mapping[str, Any],
                 structs: Mapping[str, CType] | None = None) -> TomlVariant:
    def where(key: str) -> str:
        return _where(path, index, table, key)

    required = [k for k in (REQUIRED[:3] if "launch" in table else REQUIRED) if k != "sources" or "binary" not in table]
    for key in required:
        if key not in table:
            raise InputError(f"{where(key)}: missing (a variant needs {', '.join(REQUIRED)}; or family, name, "
                             "sources and [[variant.launch]] tables; binary in place of sources)")
    unknown = sorted(set(table) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise InputError(f"{where(unknown[0])}: unknown key (keys: {', '.join(REQUIRED + OPTIONAL)})")
    family = _string(table, "family", where)
    if family not in families:
        raise InputError(f"{where('family')}: unknown family {family!r} (families: {', '.join(sorted(families))})")
    abi: LaunchAbi | None = families[family].launch_abi()
    if abi is None:
        with_abi = sorted(n for n, f in families.items() if f.launch_abi() is not None)
        raise InputError(f"{where('family')}: {family} declares no launch ABI for TOML variants "
                         f"(families with one: {', '.join(with_abi)})")
    name = _string(table, "name", where)
    base = path.parent.resolve()
    compiler, source = _compiler_and_source(table, base, where)
    include_dirs = _paths(table, "include_dirs", base, where, must_be="dir") if "include_dirs" in table else ()
    rules = parse_rules(table["placeholders"], abi, where("placeholders")) if "placeholders" in table else ()
    launches = _launches(table, abi, where, structs or {}, tuple(r.name for r in rules))
    if compiler != "binary":
        _check_declared(launches, source, (*include_dirs, kernels_dir()), where, "launch" in table)
    return TomlVariant(
        file=path, family=family, name=name, source=source, include_dirs=include_dirs,
        defines=_defines(table.get("defines", {}), where("defines")), launches=launches,
        description=str(table.get("description", "")), compiler=compiler, flags=_flags(table, where), rules=rules,
        error_model=parse_error_model(table["error"], _formats(abi), where("error")) if "error" in table else None)


def _formats(abi: LaunchAbi) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s["fmt"] for s in abi.placeholder_sets if "fmt" in s))


def _check_declared(launches: tuple[TomlLaunch, ...], source: Path, search: tuple[Path, ...], where,
                    multi: bool) -> None:
    """Each launch's kernel is declared in the source (or a header it includes) and, where its text shows
    one parameter list, takes as many parameters as `args` lists (source_scan.py: a text scan; the
    cubin's parameter table is checked exactly at compile time)."""
    declared = declared_kernels(source, search)
    for i, launch in enumerate(launches):
        key = (lambda k, i=i: where(f"launch[{i}].{k}")) if multi else where
        base = launch.kernel.split("<", 1)[0].strip()
        if "{" in base:
            continue  # the name itself comes from a placeholder: only the cubin can say
        ident = base.rsplit("::", 1)[-1]
        found = [d for d in declared if d.name == ident]
        if not found and not mentions(source, search, ident):
            names = ", ".join(sorted({d.name for d in declared})) or "none found"
            raise InputError(f"{key('kernel')}: {base!r} is not declared in {source.name} or the headers it "
                             f"includes (__global__ functions there: {names})")
        counts = {d.params for d in found}
        if len(counts) == 1 and (count := counts.pop()) != len(launch.args):
            at = f"{found[0].file.name}:{found[0].line}"
            raise InputError(f"{key('args')}: {len(launch.args)} arguments for the {count} parameters of "
                             f"{ident} ({at})")


def _compiler_and_source(table: Mapping[str, Any], base: Path, where) -> tuple[str, Path]:
    """("nvrtc" or "nvcc", the one .cu of `sources`), or ("binary", the prebuilt cubin/fatbin)."""
    compiler = table.get("compiler", "nvrtc")
    if compiler not in COMPILERS:
        raise InputError(f"{where('compiler')}: {compiler!r} is not a compiler (compilers: {', '.join(COMPILERS)})")
    if "binary" in table:
        clash = next((k for k in ("sources", "compiler", "flags", "include_dirs", "defines") if k in table), None)
        if clash:
            raise InputError(f"{where(clash)}: a variant with a prebuilt binary has no {clash} (it is not compiled)")
        binary = _paths(table, "binary", base, where, must_be="file")
        if len(binary) != 1:
            raise InputError(f"{where('binary')}: one cubin or fatbin file")
        return "binary", binary[0]
    sources = _paths(table, "sources", base, where, must_be="file")
    if len(sources) != 1:
        raise InputError(f"{where('sources')}: one .cu file (the kernel's translation unit); headers go beside it "
                         "or in include_dirs")
    return compiler, sources[0]


def _flags(table: Mapping[str, Any], where) -> tuple[str, ...]:
    value = table.get("flags", [])
    # Checked first, so that ["-arch", "sm_80"] is named for its -arch, not for its "sm_80".
    chooser = next((v for v in value if _option_name(v) in ARCH_OPTIONS), None) if isinstance(value, list) else None
    if chooser is not None:
        # The last -arch wins in nvcc and NVRTC: a variant's own would build (and cache, under --arch's key)
        # a cubin for another architecture than the one asked for.
        raise InputError(f"{where('flags')}: {chooser!r} chooses the architecture, which --arch sets (remove it)")
    if not isinstance(value, list) or not all(isinstance(v, str) and v.startswith("-") and v.strip() == v
                                              and "\n" not in v for v in value):
        raise InputError(f"{where('flags')}: expected a list of compiler options (each starting with -), "
                         f"got {value!r}")
    return tuple(value)


def _option_name(flag: Any) -> str:
    """'-arch=sm_80', ' -arch sm_80' -> '-arch' ('' for what is not an option)."""
    words = flag.split("=", 1)[0].split() if isinstance(flag, str) else []
    return words[0] if words else ""


def _launches(table: Mapping[str, Any], abi: LaunchAbi, where, structs: Mapping[str, CType],
              own: tuple[str, ...]) -> tuple[TomlLaunch, ...]:
    """The one launch of the table's own keys, or its [[variant.launch]] tables in order."""
    if "launch" not in table:
        return (parse_launch(table, abi, where, structs, own),)
    mixed = [k for k in LAUNCH_KEYS if k in table]
    if mixed:
        raise InputError(f"{where(mixed[0])}: a variant with [[variant.launch]] tables declares {mixed[0]} in each "
                         "launch, not beside them")
    tables = table["launch"]
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise InputError(f"{where('launch')}: expected [[variant.launch]] tables (kernel, grid, block, shared, args)")
    out = []
    for i, launch in enumerate(tables):
        def at(key: str, i: int = i) -> str:
            return where(f"launch[{i}].{key}")

        for key in LAUNCH_REQUIRED:
            if key not in launch:
                raise InputError(f"{at(key)}: missing (a launch needs {', '.join(LAUNCH_REQUIRED)})")
        unknown = sorted(set(launch) - set(LAUNCH_KEYS))
        if unknown:
            raise InputError(f"{at(unknown[0])}: unknown key (launch keys: {', '.join(LAUNCH_KEYS)})")
        out.append(parse_launch(launch, abi, at, structs, own))
    return tuple(out)


def _string(table: Mapping[str, Any], key: str, where) -> str:
    value = table[key]
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where(key)}: expected a non-empty string, got {value!r}")
    return value.strip()


def _paths(table: Mapping[str, Any], key: str, base: Path, where, must_be: str) -> tuple[Path, ...]:
    value = table[key]
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{where(key)}: expected a list of paths relative to the TOML file, got {value!r}")
    out = []
    for item in value:
        resolved = (base / item).resolve()
        ok = resolved.is_file() if must_be == "file" else resolved.is_dir()
        if not ok:
            raise InputError(f"{where(key)}: {item!r} is not a {'file' if must_be == 'file' else 'directory'} "
                             f"({resolved})")
        out.append(resolved)
    return tuple(out)


def _defines(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected a table of NAME = value, got {value!r}")
    out = []
    for key, item in value.items():
        if not key.isidentifier():
            raise InputError(f"{where}: {key!r} is not a C macro name")
        if isinstance(item, bool):
            item = int(item)
        if not isinstance(item, (int, str)) or (isinstance(item, str) and any(c in item for c in "\n\r")):
            raise InputError(f"{where}.{key}: expected an integer or a one-line string, got {item!r}")
        out.append((key, str(item)))
    return tuple(out)


# --- joining the family's table -------------------------------------------------------------------
def make_variant(tv: TomlVariant, abi: LaunchAbi, unit: str | None = None):
    """The Variant of a TOML declaration: its kernels are each launch's name expression over every
    placeholder value, from its own source (`unit`: the key the family knows it by); its launch runs the
    ABI's prelude, the declared launches in order (each kernel looked up in the variant's own module),
    then the ABI's epilogue."""
    from strata_bench.cases.family import Variant

    source = str(tv.source) if unit is None else unit
    multi = len(tv.launches) > 1

    def kernels(family, src: str) -> list[str]:
        if src != source:
            return []
        return list(dict.fromkeys(launch.kernel.format(**values) for launch in tv.launches
                                  for values in name_sets(tv.rules, abi)))

    def launch(family, case, kernels_, dev, outs, stream=None) -> None:
        in_source = getattr(kernels_, "in_source", None)  # a stand-in kernels object may have one module

        def lookup(name: str):
            return in_source(source, name) if in_source is not None else kernels_.get(name)

        if abi.prelude is not None:
            abi.prelude(family, case, kernels_, dev, stream)
        names = tv.names_for(abi, case)
        if names is None:
            raise InputError(f"{tv.where}: placeholders: no value for case {case.name} (the variant does not run it)")
        for i, step in enumerate(tv.launches):
            where = f"{tv.file}: variant {tv.name!r}: " + (f"launch[{i}]." if multi else "")
            step.run(abi, case, lookup, dev, outs, stream, where, names)
        if abi.epilogue is not None:
            abi.epilogue(family, case, kernels_, dev, outs, stream)

    applies = (lambda case: tv.names_for(abi, case) is not None) if tv.rules else None
    return Variant(tv.name, kernels, launch, tv.description or f"declared in {tv.file.name}", applies,
                   tv.error_model)


def load_variant_files(paths: tuple[str, ...], families: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Parse every file, then add each variant to its family's table: all files are checked before any
    family changes. A file loaded again replaces its own variants. Returns (family, variant) pairs."""
    parsed = [tv for path in paths for tv in parse_variant_file(path, families)]
    for tv in parsed:
        family = families[tv.family]
        held = family.__dict__.get("_toml_files", {})
        if any(v.name == tv.name for v in family.variants) and held.get(tv.name) != str(tv.file):
            raise InputError(f"{tv.file}: variant {tv.name!r}: name: {tv.family} already has a variant "
                             f"named {tv.name!r} ({', '.join(v.name for v in family.variants)})")
    for tv in parsed:
        family = families[tv.family]
        family.variants = tuple(v for v in family.variants if v.name != tv.name)
        unit = _unit(family, tv)
        abi = family.launch_abi()
        family.add_variant(make_variant(tv, abi, unit), unit, tv.options(), tv.build(abi))
        family.__dict__.setdefault("_toml_files", {})[tv.name] = str(tv.file)
        family.__dict__.setdefault("_toml_units", {})[tv.name] = unit
    return [(tv.family, tv.name) for tv in parsed]


def _unit(family: Any, tv: TomlVariant) -> str:
    """The key a variant's source is compiled and looked up under: its path, or, where another variant of
    the family already builds that file (with other defines or flags), the path and the variant's name,
    so each gets its own compile and its own kernels."""
    path = str(tv.source)
    owners = family.__dict__.get("_toml_units", {})
    taken = {unit for name, unit in owners.items() if name != tv.name}
    return path if path not in taken and path not in type(family).sources else f"{path}@{tv.name}"


def remove_toml_variants(families: Mapping[str, Any]) -> None:
    """Drop every TOML variant (and its source) from the families' tables (tests; a fresh process has none)."""
    for family in families.values():
        for key in ("variants", "sources", "_source_options", "_source_builds", "_toml_files", "_toml_units"):
            family.__dict__.pop(key, None)
