"""The engine: requests, the scheduler, the runner, sampling, the swap space.

One loop serves every caller (nano-vllm's `LLMEngine.step`, vLLM v1's `EngineCore.step`):
`Scheduler.schedule()` decides, `ModelRunner.execute()` prepares the context and runs the
model, `Scheduler.update_from_output()` applies the sampled tokens. The engine knows a model
only through the `Model` Protocol of runner.py, so the model layer sits above it.
"""
