"""strata-bench: parity and benchmark harness for CUDA kernels over GGUF-style quantized weights."""
__version__ = "0.1.0"
