"""Results: immutable records appended as they arrive, plus a summary with schema version and provenance.

Layout: results/<device-slug>/<kind>-<UTC stamp>.jsonl (one JSON object per line, appended and
flushed as each record arrives, so an interrupted run keeps every finished record) and a sibling
`.json` summary written at the end (temporary name, then rename). The records file is created
exclusively: a second run started in the same second into the same folder gets `<kind>-<stamp>-2`
(then -3, ...), never the first run's files.

Schema history:
  1: first version. Summary keys: schema, kind, created, provenance, summary, failures, records_file.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from strata_bench.errors import InputError
from strata_bench.results import numbers

SCHEMA_VERSION = 1


def git_state(repo: Path) -> dict[str, Any]:
    """Commit and dirty flag of the checkout the sources come from (None outside git).

    A copy of a working tree without its history (a remote GPU host) cannot know its commit; whoever
    sent it may state it in STRATA_GIT_COMMIT / STRATA_GIT_DIRTY, and the record says it was stated.
    The kernels_src hash, recomputed from the files, stays the proof of what ran."""
    stated = os.environ.get("STRATA_GIT_COMMIT")
    if stated:
        return {"commit": stated, "dirty": os.environ.get("STRATA_GIT_DIRTY", "") == "1", "stated": True}
    try:
        head = subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=repo, capture_output=True,
                              text=True, timeout=10)
        commit = head.stdout.strip() if head.returncode == 0 else None
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "kernels_src", "strata_bench"],
                                    cwd=repo, capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty if commit else None}


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower() or "unknown"


def utc_stamp() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _jsonable(value: Any) -> Any:
    # No numpy scalar can exist before numpy is imported: a command A/B's records never load it.
    np = sys.modules.get("numpy")
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if np is not None and isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and value != value:
        return None  # NaN is not JSON
    return value


@dataclass
class ResultsWriter:
    """Appends records to a JSONL file as they arrive; `finish` writes the summary."""

    directory: Path
    kind: str
    provenance: dict[str, Any]
    stamp: str = field(default_factory=utc_stamp)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._fh = _create_records(self.directory, f"{self.kind}-{self.stamp}")
        self.records_path = Path(self._fh.name)
        self.summary_path = self.records_path.with_suffix(".json")

    def append(self, record: dict[str, Any]) -> None:
        self._fh.write(json.dumps(_jsonable(record), sort_keys=True) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def finish(self, summary: dict[str, Any], failures: int) -> Path:
        self._fh.close()
        body = {"schema": SCHEMA_VERSION, "kind": self.kind, "created": self.stamp,
                "provenance": self.provenance, "summary": summary, "failures": int(failures),
                "records_file": self.records_path.name}
        write_json_atomic(self.summary_path, body)
        return self.summary_path

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def discard(self) -> None:
        """Remove the records file unfinished: a run refused before its first case (bad input, exit 2)
        leaves nothing written."""
        self.close()
        self.records_path.unlink(missing_ok=True)


def _create_records(directory: Path, stem: str):
    """A new records file `stem.jsonl`, else `stem-2.jsonl`, ...: created exclusively (O_EXCL), so two
    writers never share one, and skipping a name whose summary is there (its records may be gone)."""
    for n in itertools.count(1):
        name = stem if n == 1 else f"{stem}-{n}"
        if (directory / f"{name}.json").exists():
            continue
        try:
            return open(directory / f"{name}.jsonl", "x", encoding="utf-8")
        except FileExistsError:
            continue


def write_json_atomic(path: Path, body: Any) -> None:
    """Write to a temporary file of its own beside `path`, then rename it onto `path`: a reader sees the
    old file or the new one, and two writers never share a temporary file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(_jsonable(body), indent=2, sort_keys=True) + "\n")
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a summary is read by others, as before
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records of a results file: a .jsonl directly, or the .jsonl a summary .json names.

    Every record is a JSON object on its own UTF-8 line; only a cut last line (a crash mid-write) is
    dropped, anything else that is not a record is an InputError naming the file and line."""
    path = Path(path)
    if not existing(path):
        raise InputError(f"results file not found: {path}")
    if path.suffix == ".json":
        summary = read_summary(path)
        path = path.with_name(summary["records_file"])
        if not existing(path):
            raise InputError(f"records file not found: {path}")
    try:
        raw = path.read_bytes()
    except OSError as exc:  # a folder, no permission
        raise InputError(f"{path} cannot be read: {exc.strerror or exc}") from None
    lines = [(n, line) for n, line in enumerate(raw.split(b"\n"), 1) if line.strip()]
    records = []
    for index, (lineno, line) in enumerate(lines):
        try:
            record = numbers.loads(line.decode("utf-8"), f"{path}: record {index + 1} (line {lineno})")
        except (UnicodeDecodeError, json.JSONDecodeError):
            if index == len(lines) - 1 and index > 0:
                break  # a crash can cut the last line; every complete line before it is kept
            raise InputError(f"{path} is not a results file (line {lineno} is not UTF-8 JSON)") from None
        if not isinstance(record, dict):
            raise InputError(f"{path} is not a results file (line {lineno} is {json.dumps(record)[:40]}, "
                             "not a JSON object)")
        records.append(record)
    return records


def existing(path: Path) -> bool:
    """Whether `path` exists; InputError (not an OSError) for a name the system refuses (too long)."""
    try:
        return Path(path).exists()
    except OSError as exc:
        raise InputError(f"results file {str(path)[:80]}...: {exc.strerror or exc}" if len(str(path)) > 80
                         else f"results file {path}: {exc.strerror or exc}") from None


def read_summary(path: Path) -> dict[str, Any]:
    """A summary .json, checked: an object whose schema is a known integer version and which names its
    records file beside it; InputError otherwise."""
    try:
        body = numbers.loads(Path(path).read_bytes().decode("utf-8"), str(path))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path} is not a results summary: {exc}") from None
    if not isinstance(body, dict) or "schema" not in body:
        raise InputError(f"{path} is not a results summary (no schema key)")
    schema = body["schema"]
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise InputError(f"{path} is not a results summary (schema {json.dumps(schema)} is not a version number)")
    if schema > SCHEMA_VERSION:
        raise InputError(f"{path} has schema {schema}, newer than this strata-bench ({SCHEMA_VERSION})")
    records = body.get("records_file")
    if not isinstance(records, str) or not records or Path(records).name != records:
        raise InputError(f"{path} is not a results summary (records_file {json.dumps(records)} is not a file name)")
    for key, kind, what in _SUMMARY_FIELDS:
        if key in body and (not isinstance(body[key], kind) or isinstance(body[key], bool)):
            raise InputError(f"{path} is not a results summary ({key} {json.dumps(body[key])[:40]} is not {what})")
    return body


# Fields a reader uses beside the records: a wrong type is one line here, not a TypeError later.
_SUMMARY_FIELDS = (("kind", str, "a string"), ("created", str, "a string"), ("provenance", dict, "an object"),
                   ("summary", dict, "an object"), ("failures", int, "an integer"))


def summary_files(directory: Path) -> Iterable[Path]:
    return sorted(p for p in Path(directory).rglob("*.json") if not p.name.endswith(".tmp"))
