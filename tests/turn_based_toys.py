"""Small two-player turn-based games written to the turn-based contract (sequential dynamics,
a legal-action mask as `obs["action_mask"]`, only the mover's row of the joint action read, an
illegal move ending the game with mover -1 / other +1 and `info["illegal_action"]`), for the
tests of the evaluation and opponent helpers in `train/`.

* `PickGame`: player 0 picks `a` in {0, 1, 2, 3}; `a = 3` ends the game in a draw; otherwise
  player 1 picks `b` in {0, 1, 2} other than `a` and wins iff `b == (a + 1) % 3`, else player 0
  wins. Action space Discrete(4); observation per agent int32[2] = (ply, a).
* `TicTacToe`: PettingZoo's `classic.tictactoe_v3` rules and observation (planes `[3, 3, 2]`:
  observer's marks, opponent's marks; cell `i` = `observation[i // 3, i % 3]`).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxenvs import spaces, struct
from jaxenvs.core import Environment, Traits

TRAITS = Traits(
    num_agents=2, dynamics="sequential", chance="deterministic", information="perfect",
    utility="zero_sum", reward_style="terminal", action_style="full_action_set",
)


def _end_rewards(mover, illegal, mover_wins, draw):
    """float32[2]: the mover's reward (+1 win, -1 loss or illegal, 0 draw) and minus it for the other."""
    r = jnp.where(illegal, -1.0, jnp.where(draw, 0.0, jnp.where(mover_wins, 1.0, -1.0)))
    return jnp.where(jnp.arange(2) == mover, r, -r).astype(jnp.float32)


@struct.dataclass
class PickState:
    ply: jnp.ndarray  # int32: 0 player 0 to move, 1 player 1 to move, 2 over
    a: jnp.ndarray  # int32: player 0's pick, -1 before


class PickGame(Environment):
    traits = TRAITS

    def reset_env(self, key, params):
        state = PickState(ply=jnp.zeros((), jnp.int32), a=jnp.full((), -1, jnp.int32))
        return self._obs(state), state

    def legal_action_mask(self, state, params=None):
        first = jnp.ones(4, bool)
        second = jnp.arange(4) != state.a
        second = second.at[3].set(False)
        rows = jnp.stack([first & (state.ply == 0), second & (state.ply == 1)])
        return rows

    def current_player(self, state, params=None):
        return jnp.minimum(state.ply, 1).astype(jnp.int32)

    def _obs(self, state):
        o = jnp.broadcast_to(jnp.stack([state.ply, state.a]), (2, 2)).astype(jnp.int32)
        return {"observation": o, "action_mask": self.legal_action_mask(state).astype(jnp.uint8)}

    def step_env(self, key, state, action, params):
        mover = self.current_player(state)
        act = action[mover]
        legal = self.legal_action_mask(state)[mover, jnp.clip(act, 0, 3)] & (act >= 0) & (act <= 3)
        illegal = ~legal
        first = state.ply == 0
        ends = illegal | ~first | (act == 3)
        draw = first & (act == 3)
        mover_wins = jnp.where(first, False, act == (state.a + 1) % 3)
        reward = jnp.where(ends, _end_rewards(mover, illegal, mover_wins, draw), 0.0)
        new = PickState(
            ply=jnp.where(ends, 2, 1).astype(jnp.int32),
            a=jnp.where(first & ~illegal, act, state.a).astype(jnp.int32),
        )
        return self._obs(new), new, reward, ends, jnp.zeros((), bool), {"illegal_action": illegal}

    def observation_space(self, params=None):
        return spaces.Dict({
            "observation": spaces.Box(-1, 3, (2,), np.int32),
            "action_mask": spaces.Box(0, 1, (4,), np.uint8),
        })

    def action_space(self, params=None):
        return spaces.Discrete(4)


LINES = np.array([(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)])


@struct.dataclass
class TicTacToeState:
    board: jnp.ndarray  # int32[9]: 0 empty, 1 player 0's mark, 2 player 1's
    mover: jnp.ndarray  # int32
    over: jnp.ndarray  # bool


class TicTacToe(Environment):
    traits = TRAITS

    def reset_env(self, key, params):
        state = TicTacToeState(jnp.zeros(9, jnp.int32), jnp.zeros((), jnp.int32), jnp.zeros((), bool))
        return self._obs(state), state

    def current_player(self, state, params=None):
        return state.mover

    def legal_action_mask(self, state, params=None):
        row = (state.board == 0) & ~state.over
        return jnp.stack([row & (state.mover == 0), row & (state.mover == 1)])

    def _obs(self, state):
        planes = jnp.stack([
            jnp.stack([state.board == me + 1, state.board == 2 - me], axis=-1) for me in (0, 1)
        ]).reshape(2, 3, 3, 2).astype(jnp.int32)
        return {"observation": planes, "action_mask": self.legal_action_mask(state).astype(jnp.uint8)}

    def step_env(self, key, state, action, params):
        mover = state.mover
        cell = jnp.clip(action[mover], 0, 8)
        illegal = (state.board[cell] != 0) | (action[mover] != cell)
        board = jnp.where(illegal, state.board, state.board.at[cell].set(mover + 1))
        won = jnp.any(jnp.all(board[jnp.asarray(LINES)] == mover + 1, axis=-1))
        full = jnp.all(board != 0)
        ends = illegal | won | full
        reward = jnp.where(ends, _end_rewards(mover, illegal, won, full & ~won), 0.0)
        new = TicTacToeState(board, jnp.where(ends, mover, 1 - mover).astype(jnp.int32), ends)
        return self._obs(new), new, reward, ends, jnp.zeros((), bool), {"illegal_action": illegal}

    def observation_space(self, params=None):
        return spaces.Dict({
            "observation": spaces.Box(0, 1, (3, 3, 2), np.int32),
            "action_mask": spaces.Box(0, 1, (9,), np.uint8),
        })

    def action_space(self, params=None):
        return spaces.Discrete(9)
