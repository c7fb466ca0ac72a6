"""The launch language: kernel variants declared in TOML against a family's launch ABI (docs/ABI.md): the ABI a
family publishes (abi.py), C types and constant expressions, the launch arguments, grid and placeholders, a
variant's own error model, the check of a launch against a cubin's parameter table, and `--variants` as an
extension of a run."""
