"""RelativePosition: GridWorld's tutorial wrapper (Gymnasium's custom-environment tutorial,
``gymnasium_env/wrappers/relative_position.py``): the observation becomes ``target - agent``."""

from __future__ import annotations

import numpy as np

from jaxenvs import spaces
from jaxenvs.core import Environment
from jaxenvs.wrappers.observation import ObservationWrapper

__all__ = ["RelativePosition"]


class RelativePosition(ObservationWrapper):
    """The observation ``{"agent": int32[2], "target": int32[2]}`` becomes ``target - agent``.

    Observation: int32[2], the target's offset from the agent in cells, in
    ``Box(-(size - 1), size - 1, (2,), int32)`` (computed from the inner spaces' bounds).
    """

    def __init__(self, env: Environment):
        super().__init__(env)
        space = env.observation_space(env.default_params)
        ok = isinstance(space, spaces.Dict) and set(space.keys()) == {"agent", "target"}
        ok = ok and all(
            isinstance(space[k], spaces.Box) and space[k].dtype.kind == "i" and space[k].shape == (2,)
            for k in ("agent", "target")
        )
        if not ok:
            raise TypeError(
                "RelativePosition needs an observation space Dict({'agent': Box(int32, (2,)), "
                f"'target': Box(int32, (2,))}} (GridWorld's), got {space}"
            )

    def observation(self, obs, params):
        return obs["target"] - obs["agent"]

    def observation_space(self, params=None):
        inner = self.env.observation_space(params)
        agent, target = inner["agent"], inner["target"]
        low = target.low.astype(np.int64) - agent.high
        high = target.high.astype(np.int64) - agent.low
        return spaces.Box(low, high, (2,), np.int32)
