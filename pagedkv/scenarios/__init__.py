"""Named, deterministic step-by-step scenarios that the dashboard, notebooks, tests and demo share.

`SCENARIOS` (in `library`) names the traces; `ScenarioRun` (in `run`) applies one to a real
pool step by step, records every step and rewinds exactly; `actions` holds the plain data a
run is made of. See those modules.
"""

from pagedkv.scenarios.actions import OPS, Action, ActionRecord, Scenario
from pagedkv.scenarios.library import SCENARIOS, get_scenario
from pagedkv.scenarios.run import ScenarioRun, default_model

__all__ = [
    "OPS",
    "SCENARIOS",
    "Action",
    "ActionRecord",
    "Scenario",
    "ScenarioRun",
    "default_model",
    "get_scenario",
]
