"""Thin click commands, one module each; `main` is the console entry point."""
