"""Named, deterministic step-by-step scenarios that the dashboard, notebooks, tests and demo share.

`SCENARIOS` (in `library`) names the traces; `ScenarioRun` (in `run`) applies one to a real
pool step by step, records every step and rewinds exactly. See those modules.
"""

from .library import SCENARIOS, get_scenario
from .run import OPS, Action, Scenario, ScenarioRun, StepRecord, default_model

__all__ = [
    "OPS",
    "SCENARIOS",
    "Action",
    "Scenario",
    "ScenarioRun",
    "StepRecord",
    "default_model",
    "get_scenario",
]
