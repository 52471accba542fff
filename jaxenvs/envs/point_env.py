"""PointEnv: garage's "Adding a New Environment" tutorial (``garage.envs.PointEnv``).

A point robot in the plane is steered to the origin by choosing its velocity. Dynamics, as in
the tutorial, with its constants as params fields:

* reset: position uniform in ``[-reset_bound, reset_bound]^2`` (``[-1, 1]^2`` by default);
* action: velocity float32[2] in ``Box(-action_bound, action_bound)`` (0.1 by default); it is
  clipped to those bounds (documented behaviour: the tutorial only declares the box; ``make(...,
  checked=True)`` with `jaxenvs.checked` raises on an out-of-range action instead);
* ``position += clipped action``; reward ``-sqrt(x^2 + y^2)`` of the new position (float32);
* ``terminated`` when ``|x| < goal_tolerance`` and ``|y| < goal_tolerance`` (strict, 0.01);
* observation float32[2] = position (unbounded); ``info["distance"]`` = ``-reward`` (float32).

Edge cases (documented rules, outside the tutorial):

* a NaN in an action component makes that component of the position (and of the observation),
  the reward and ``info["distance"]`` NaN and ``terminated`` False, from then on (a NaN never looks like a good result: it is never
  rewarded as being at the goal); `jaxenvs.checked` raises on it, and training stops on a
  non-finite loss;
* stepping a state whose episode terminated (no auto-reset) walks on: the dynamics apply
  unchanged and ``terminated`` is recomputed from the new position; with ``make(...,
  checked=True)`` and `jaxenvs.checked` such a step raises.

The step draws no randomness and is differentiable: ``jax.grad`` of the reward or the next
position with respect to the action, the state or the params flows through ``step``. Clipping
has zero gradient in an action component outside ``[-action_bound, action_bound]`` (exactly on
a bound ``jnp.clip`` gives 0.5); at the exact origin the distance's gradient is taken as 0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxenvs import prng, struct

from jaxenvs import spaces
from jaxenvs.core import Environment, Traits, require_param
from jaxenvs.rendering import draw
from jaxenvs.levels import ParamSpace, Uniform

LIGHT_GREY = (225, 225, 225)


MAX_BOUND = 1e18  # largest action_bound and reset_bound: x**2 + y**2 stays far below float32's max


@struct.dataclass
class EnvParams:
    action_bound: float = 0.1  # largest |velocity| per axis and step; in (0, MAX_BOUND]
    goal_tolerance: float = 0.01  # terminal when |x| and |y| are both below it; > 0
    reset_bound: float = 1.0  # initial position uniform in [-reset_bound, reset_bound]^2; in (0, MAX_BOUND]


@struct.dataclass
class EnvState:
    position: jax.Array  # float32[2], (x, y)


def _distance(position):
    """Euclidean norm of ``position`` with a zero (not NaN) gradient at the origin; NaN stays NaN."""
    sq = jnp.sum(position * position)
    safe = jnp.where(sq == 0, 1.0, sq)
    return jnp.where(sq == 0, 0.0, jnp.sqrt(safe))


class PointEnv(Environment):
    """Steer a point in the plane to the origin (garage's environment tutorial)."""

    traits = Traits(num_agents=1, chance="deterministic", information="perfect", reward_style="step")
    render_fps = 10

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def validate_params(self, params: EnvParams) -> None:
        require_param("PointEnv", "goal_tolerance", params.goal_tolerance, low=0, low_open=True)
        for name in ("action_bound", "reset_bound"):
            # bounded so that the float32 distance sqrt(x**2 + y**2) of a reset or a step stays finite
            require_param("PointEnv", name, getattr(params, name), low=0, low_open=True, high=MAX_BOUND)

    def param_space(self):
        """`jaxenvs.levels.ParamSpace`: the start region's half-width ``reset_bound`` uniform in
        [0.5, 2) and the goal's half-width ``goal_tolerance`` uniform in [0.005, 0.05); the action
        bound stays 0.1 (the goal is always the origin: the tutorial has no goal field)."""
        return ParamSpace(self.default_params, reset_bound=Uniform(0.5, 2.0), goal_tolerance=Uniform(0.005, 0.05))

    def reset_env(self, key, params):
        b = params.reset_bound
        position = prng.uniform(key, (2,), -b, b)
        state = EnvState(position=position)
        return state.position, state

    def step_env(self, key, state, action, params):
        action = jnp.clip(action, -params.action_bound, params.action_bound)
        position = (state.position + action).astype(jnp.float32)
        distance = _distance(position).astype(jnp.float32)
        terminated = jnp.all(jnp.abs(position) < params.goal_tolerance)
        state = state.replace(position=position)
        truncated = jnp.zeros((), bool)
        return position, state, -distance, terminated, truncated, {"distance": distance}

    def render(self, state, params=None):
        """uint8[256, 256, 3] view of ``[-2 * reset_bound, 2 * reset_bound]^2``, y upwards.

        White background, the reset region as a light grey square, grey axes through the origin,
        the goal region as a green square (at least 7 px wide so that it stays visible) and the
        point as a blue disc of radius 6 px; a point outside the view is drawn at its edge.
        """
        size = 256
        half_view = 2.0 * params.reset_bound
        scale = size / (2.0 * half_view)  # pixels per unit
        centre = size / 2.0
        frame = draw.canvas(size, size)
        r = params.reset_bound * scale
        frame = draw.fill_rect(frame, centre - r, centre - r, centre + r, centre + r, LIGHT_GREY)
        frame = draw.paint(frame, draw.hline_mask((size, size), centre, 1.0), draw.GREY)
        frame = draw.paint(frame, draw.vline_mask((size, size), centre, 1.0), draw.GREY)
        g = jnp.maximum(params.goal_tolerance * scale, 3.5)
        frame = draw.fill_rect(frame, centre - g, centre - g, centre + g, centre + g, draw.GREEN)
        px = jnp.clip(centre + state.position[0] * scale, 0.0, size)
        py = jnp.clip(centre - state.position[1] * scale, 0.0, size)
        return draw.fill_circle(frame, px, py, 6.0, draw.BLUE)

    def render_text(self, state, params=None):
        x, y = (float(v) for v in np.asarray(state.position))
        return f"position=({x:+.4f}, {y:+.4f}) distance={float(np.hypot(x, y)):.4f}"

    def observation_space(self, params=None):
        return spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def action_space(self, params=None):
        """``Box(-action_bound, action_bound, (2,))`` float32 (bounds may be traced)."""
        return spaces.Box(-params.action_bound, params.action_bound, (2,), np.float32)
