"""The rich console the commands print tables on (defined once, in render)."""
from strata_bench.report.live import PIPED_WIDTH, stdout_console  # noqa: F401
