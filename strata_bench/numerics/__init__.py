"""Exact host arithmetic: q8_1 blocks as the device makes them, error-bound algebra, float64 references."""
