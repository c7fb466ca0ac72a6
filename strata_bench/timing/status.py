"""What became of a variant in bench: one kind from a fixed set, and the reason in words. A record keeps
both (`status`: "kind: reason", as before, and `reason`), so files written before read the same; code
asks the kind, never a prefix of the text."""
from __future__ import annotations

import enum
from dataclasses import dataclass


class BenchStatus(enum.Enum):
    TIMED = "timed"
    PARITY_FAILED = "parity failed"  # the check step: the variants disagree, nothing timed
    OUTPUT_DIFFERS = "timed output differs"  # timed, but a copy's outputs are not the checked ones
    IMPOSSIBLE = "impossible"  # timed, but faster than the bytes allow
    KERNEL_FAULT = "kernel fault"  # the device's context is gone
    CHECKED = "checked"  # bench --profile's child: the check's one call of each variant, nothing timed


@dataclass(frozen=True)
class TimingStatus:
    kind: BenchStatus = BenchStatus.TIMED
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.reason}" if self.reason else self.kind.value

    @property
    def timed(self) -> bool:
        return self.kind is BenchStatus.TIMED

    @property
    def rejected(self) -> bool:
        """Timed, but its figures are not results (never shown as a speedup; exit 1)."""
        return self.kind in (BenchStatus.OUTPUT_DIFFERS, BenchStatus.IMPOSSIBLE)

    @classmethod
    def parse(cls, text: str) -> "TimingStatus":
        """The TimingStatus a record's text holds (records read back); an unknown kind is a ValueError."""
        for kind in BenchStatus:
            if text == kind.value:
                return cls(kind)
            if text.startswith(kind.value + ": "):
                return cls(kind, text[len(kind.value) + 2:])
        raise ValueError(f"not a bench status: {text!r}")


TIMED = TimingStatus()
