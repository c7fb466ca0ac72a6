"""Engines built from source trees for whole-engine A/B runs: llama.cpp's CUDA build (tree, plan, workspace,
build), and the identity of its outputs (token ids, logits, KL divergence)."""
