"""The model: TinyLM (a pure forward over a prepared context), attention kernels, weights, corpus.

As in nano-vllm's `models/` and `layers/`: the model computes from the context the engine's
runner prepares (pagedkv.engine.context) and never walks sequences itself.
"""
