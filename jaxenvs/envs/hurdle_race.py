"""HurdleRace: POSGGym's custom-environment tutorial ("Creating a custom environment").

Two runners race on separate, identical tracks of cells ``0 .. track_length`` (10 by default).
Dynamics, as in the tutorial's ``HurdleRaceModel``:

* reset: both runners stand on cell 0; one hurdle is drawn uniformly from each slot of
  ``hurdle_slots`` (by default one of {1, 2}, one of {4, 5}, one of {7, 8}), independently; the
  hurdles are the same on both tracks and stay put for the episode;
* actions ``RUN = 0``, ``JUMP = 1``, one per runner, taken simultaneously:

  - RUN moves one cell if the next cell holds no hurdle, then one more if the cell after that
    holds none; the position is capped at ``track_length``. A RUN in front of a hurdle leaves the
    runner where it is;
  - JUMP moves one cell (landing on the hurdle's cell when there is one), but when the next cell
    holds a hurdle it succeeds only with probability ``params.jump_success_rate`` (0.9); a failed
    jump leaves the runner in place. Each runner's jump draws its own uniform number
    (`jump_uniforms`), so the two runners' jumps are independent;

* observation per runner (int32, so ``obs`` is int32[2]): ``HURDLE = 1`` if the runner's next
  cell holds a hurdle, else ``NOHURDLE = 0``. A runner sees nothing of the other runner or of
  hurdles further ahead;
* ``terminated`` once any runner stands on ``track_length``; then the runner who got there
  scores +1 and the other -1, or both 0 when both got there on the same step (a draw). Every
  other step rewards 0 to both (reward float32[2]; the rewards sum to 0 on every step);
* ``info["pos"]`` (int32[2]) are the positions, ``info["outcome"]`` (int32[2]) each runner's
  outcome: ``WIN = 1``, ``LOSS = -1``, ``DRAW = 0`` (POSGGym's ``Outcome`` values) or
  ``NOT_FINISHED = 2`` (POSGGym's ``Outcome.NA``) while nobody has reached the end.
  `HurdleRace.info` gives the same dict for a state from ``reset``.

Out-of-range actions are clipped into ``{0, 1}`` (documented behaviour; ``make(...,
checked=True)`` with `jaxenvs.checked` raises instead). Stepping a terminated state (no
auto-reset) is outside the tutorial: positions stay capped at ``track_length``, and reward and
outcome are again read off the positions (with ``make(..., checked=True)`` and
`jaxenvs.checked` such a step raises). ``jump_success_rate`` must be a probability in
``[0, 1]`` (``validate_params``; a NaN rate would make every jump over a hurdle fail).
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxenvs import prng, struct

from jaxenvs import spaces
from jaxenvs.core import Environment, Traits, require_param
from jaxenvs.rendering import draw
from jaxenvs.levels import ParamSpace, Uniform

RUN = 0
JUMP = 1
NOHURDLE = 0
HURDLE = 1
# per-runner outcome codes of info["outcome"]
LOSS = -1
DRAW = 0
WIN = 1
NOT_FINISHED = 2

DEFAULT_HURDLE_SLOTS = ((1, 2), (4, 5), (7, 8))
NUM_AGENTS = 2


@struct.dataclass
class EnvParams:
    jump_success_rate: float = 0.9  # probability that a JUMP over a hurdle succeeds; in [0, 1]


@struct.dataclass
class EnvState:
    pos: jax.Array  # int32[2], each runner's cell in 0 .. track_length
    hurdles: jax.Array  # int32[len(hurdle_slots)], the hurdles' cells (shared by both tracks)


def jump_uniforms(key: jax.Array) -> jax.Array:
    """float32[2]: the uniform draws in [0, 1) that decide each runner's jump in ``step``.

    ``step_env(key, ...)`` draws exactly ``jump_uniforms(key)``; a jump over a hurdle succeeds
    when the runner's draw is below ``jump_success_rate``.
    """
    return prng.uniform(key, (NUM_AGENTS,))


def move(pos, hurdles, action, uniforms, jump_success_rate, track_length: int) -> jax.Array:
    """int32[2]: the runners' next positions (pure, branch-free).

    ``pos`` int32[2], ``hurdles`` int32[H], ``action`` int32[2] (clipped into {RUN, JUMP}),
    ``uniforms`` float32[2] in [0, 1) (see `jump_uniforms`).
    """
    action = jnp.clip(action, RUN, JUMP)
    blocked1 = _hurdle_at(pos + 1, hurdles)
    run1 = pos + (~blocked1).astype(jnp.int32)
    run = run1 + ((~blocked1) & ~_hurdle_at(run1 + 1, hurdles)).astype(jnp.int32)
    jump_ok = (~blocked1) | (uniforms < jump_success_rate)
    jump = pos + jump_ok.astype(jnp.int32)
    new = jnp.where(action == RUN, run, jump)
    return jnp.minimum(new, track_length).astype(jnp.int32)


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _hurdle_at(cells, hurdles):
    """bool[...]: whether each of ``cells`` holds a hurdle."""
    return jnp.any(cells[..., None] == hurdles, axis=-1)


class HurdleRace(Environment):
    """Two runners race over hurdles they see one cell ahead (POSGGym's custom-env tutorial).

    ``track_length`` (cells ``0 .. track_length``; the end is reached on ``track_length``) and
    ``hurdle_slots`` (one hurdle drawn uniformly from each tuple of cells) are constructor
    arguments because they fix the state's and the frame's shapes.
    """

    traits = Traits(
        num_agents=NUM_AGENTS,
        dynamics="simultaneous",
        chance="stochastic",
        information="imperfect",
        utility="zero_sum",
        reward_style="terminal",
        action_style="minimal",
    )
    render_fps = 4
    ACTION_NAMES = ("RUN", "JUMP")  # per runner

    def __init__(self, track_length: int = 10, hurdle_slots: Sequence[Sequence[int]] = DEFAULT_HURDLE_SLOTS):
        require_param("HurdleRace", "track_length", track_length, integer=True, low=2)
        self.track_length = int(track_length)
        try:
            ok = len(hurdle_slots) > 0 and all(len(s) > 0 and all(map(_is_int, s)) for s in hurdle_slots)
        except TypeError:
            ok = False
        if not ok:
            raise ValueError(
                "HurdleRace hurdle_slots must be a non-empty sequence of non-empty sequences of integer cells, "
                f"got {hurdle_slots!r}"
            )
        slots = tuple(tuple(int(c) for c in s) for s in hurdle_slots)
        bad = [c for slot in slots for c in slot if not 1 <= c <= self.track_length - 1]
        if bad:
            raise ValueError(
                f"HurdleRace hurdle cells must lie in 1 .. track_length - 1 = {self.track_length - 1}, got {bad}"
            )
        self.hurdle_slots = slots
        width = max(len(s) for s in slots)
        self._slot_cells = np.array([s + (s[-1],) * (width - len(s)) for s in slots], dtype=np.int32)
        self._slot_sizes = np.array([len(s) for s in slots], dtype=np.int32)
        # frame geometry, as in the tutorial: 512 pixels wide, one square cell per position
        self.window_width = 512
        self.cell_size = self.window_width // (self.track_length + 1)
        self.window_height = 2 * self.cell_size

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def validate_params(self, params: EnvParams) -> None:
        require_param("HurdleRace", "jump_success_rate", params.jump_success_rate, low=0, high=1)

    def param_space(self):
        """`jaxenvs.levels.ParamSpace`: ``jump_success_rate`` uniform in [0.5, 1). The hurdle
        layout is not a level field: ``hurdle_slots`` fixes the state's shape, so it is a
        constructor argument (the hurdles' cells are drawn from it at every reset)."""
        return ParamSpace(self.default_params, jump_success_rate=Uniform(0.5, 1.0))

    def reset_env(self, key, params):
        choice = jax.random.randint(key, self._slot_sizes.shape, 0, jnp.asarray(self._slot_sizes), dtype=jnp.int32)
        hurdles = jnp.asarray(self._slot_cells)[jnp.arange(len(self.hurdle_slots)), choice]
        state = EnvState(pos=jnp.zeros((NUM_AGENTS,), jnp.int32), hurdles=hurdles.astype(jnp.int32))
        return self._obs(state), state

    def step_env(self, key, state, action, params):
        pos = move(state.pos, state.hurdles, action, jump_uniforms(key), params.jump_success_rate, self.track_length)
        state = state.replace(pos=pos)
        finished = pos == self.track_length
        terminated = jnp.any(finished)
        # +1 to a lone finisher, -1 to the other runner; 0 to both on a draw or before the end
        reward = finished.astype(jnp.float32) - finished[::-1].astype(jnp.float32)
        truncated = jnp.zeros((), bool)
        return self._obs(state), state, reward, terminated, truncated, self.info(state)

    def _obs(self, state):
        return _hurdle_at(state.pos + 1, state.hurdles).astype(jnp.int32)

    def info(self, state: EnvState) -> dict:
        """The ``info`` dict of this environment's ``state``: ``{"pos": int32[2], "outcome": int32[2]}``.

        ``step`` returns it for the new state; call it on a state from ``reset`` for reset-time info
        (outcome ``NOT_FINISHED`` for both runners). Takes the unwrapped state.
        """
        finished = state.pos == self.track_length
        other = finished[::-1]
        outcome = jnp.where(
            finished & other, DRAW, jnp.where(finished, WIN, jnp.where(other, LOSS, NOT_FINISHED))
        )
        return {"pos": state.pos.astype(jnp.int32), "outcome": outcome.astype(jnp.int32)}

    def render(self, state, params=None):
        """uint8[2 * cell, 512, 3] with ``cell = 512 // (track_length + 1)`` (92 x 512 by default).

        As in the tutorial: track ``i`` is pixel row band ``[i * cell, (i + 1) * cell)``, cell ``c``
        spans columns ``[c * cell, (c + 1) * cell)``; brown hurdles are vertical bars
        ``cell // 6`` wide through both tracks at the hurdle cells' centres, runner 0 is a blue and
        runner 1 a red circle of radius ``cell // 3`` at its cell's centre, black grid lines 3
        pixels wide. The finish line is a green bar ``cell // 6`` wide at the left edge of cell
        ``track_length``.
        """
        cell = self.cell_size
        shape = (self.window_height, self.window_width)
        frame = draw.canvas(*shape)
        ys, xs = draw.pixel_grid(*shape)
        bar = cell // 6
        hurdle_x = (state.hurdles.astype(jnp.float32) + 0.5) * cell
        on_hurdle = jnp.any(jnp.abs(xs[..., None] - hurdle_x) <= bar / 2, axis=-1)
        frame = draw.paint(frame, on_hurdle, draw.BROWN)
        track_end = self.track_length * cell
        on_grid = (
            (jnp.abs(xs - jnp.round(xs / cell) * cell) <= 1.5) & (xs <= track_end + 1.5)
        ) | (jnp.abs(ys - jnp.round(ys / cell) * cell) <= 1.5)
        frame = draw.paint(frame, on_grid, draw.BLACK)
        frame = draw.paint(frame, draw.vline_mask(shape, track_end, bar), draw.GREEN)
        for i, color in enumerate((draw.BLUE, draw.RED)):
            cx = (state.pos[i].astype(jnp.float32) + 0.5) * cell
            frame = draw.fill_circle(frame, cx, (i + 0.5) * cell, cell // 3, color)
        return frame

    def render_text(self, state, params=None):
        """One line per runner: ``'.'`` free cell, ``'H'`` hurdle, the runner's id on its cell,
        ``'|'`` the finish line before cell ``track_length``."""
        pos, hurdles = np.asarray(state.pos), set(np.asarray(state.hurdles).tolist())
        lines = []
        for i in range(NUM_AGENTS):
            cells = [str(i) if c == pos[i] else "H" if c in hurdles else "." for c in range(self.track_length + 1)]
            lines.append(f"{i} " + "".join(cells[:-1]) + "|" + cells[-1])
        return "\n".join(lines)

    def observation_space(self, params=None):
        """ONE runner's observation: ``NOHURDLE = 0`` or ``HURDLE = 1`` (int32 scalar)."""
        return spaces.Discrete(2)

    def action_space(self, params=None):
        """ONE runner's action: ``RUN = 0`` or ``JUMP = 1``."""
        return spaces.Discrete(JUMP + 1)
