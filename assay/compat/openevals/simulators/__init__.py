"""``from openevals.simulators import …`` → ``from assay.compat.openevals.simulators import …``:
multi-turn simulation of an app against a simulated user, scored by trajectory evaluators.

The simulated user of :func:`create_llm_simulated_user` speaks through assay's judge endpoints
(``model="openai:…"`` or a run's judge, with its rate limits, retries, cache and cost accounting);
a LangChain chat model passed as ``client`` is called through its own API, as in openevals.
:func:`simulation_trace` turns a result into a trace record that ``assay run`` scores.
"""

from __future__ import annotations

from assay.compat.openevals.simulators.multiturn import (
    MultiturnSimulatorResult,
    run_multiturn_simulation,
    run_multiturn_simulation_async,
    simulation_trace,
)
from assay.compat.openevals.simulators.prebuilts import (
    SimulatedUser,
    create_async_llm_simulated_user,
    create_llm_simulated_user,
)

__all__ = [
    "MultiturnSimulatorResult",
    "SimulatedUser",
    "create_async_llm_simulated_user",
    "create_llm_simulated_user",
    "run_multiturn_simulation",
    "run_multiturn_simulation_async",
    "simulation_trace",
]
