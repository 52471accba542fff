"""`PlayAgainst`: one seat of a turn-based game as a single-agent environment, the other seats
played by a fixed policy inside ``reset`` and ``step``.

A learner that knows nothing of turns (Gymnasium, Stable-Baselines3, a single-agent trainer) plays
``TicTacToe-v0`` against a random-legal opponent::

    import jax, jaxenvs
    from jaxenvs.wrappers import PlayAgainst

    env = PlayAgainst(jaxenvs.make("TicTacToe-v0", autoreset=False), seat="random")
    obs, state = env.reset(jax.random.key(0))           # obs: the learner's view, its mask included
    action = env.action_space().sample(jax.random.key(1), mask=obs["action_mask"])
    obs, state, reward, terminated, truncated, info = env.step(jax.random.key(2), state, action)

The wrapper is pure: it works under ``jit``/``vmap``/``scan`` and in the Gymnasium and SB3
adapters like any single-agent environment.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxenvs import spaces, struct
from jaxenvs.core import Environment
from jaxenvs.wrappers.base import AutoReset, Wrapper, has_wrapper
from jaxenvs.games import allowed_opponents, named_opponents, random_legal

__all__ = ["PlayAgainst", "PlayAgainstState", "random_legal_policy"]

Policy = Callable[[jax.Array, Any], jax.Array]


def random_legal_policy(space: spaces.Discrete) -> Policy:
    """``policy(key, obs) -> int32[]``: uniform among the legal actions of ``obs["action_mask"]``
    (`jaxenvs.games.random_legal`), uniform on ``space`` when the observation carries no mask."""
    def policy(key, obs):
        if isinstance(obs, dict) and "action_mask" in obs:
            return random_legal(key, obs)
        return space.sample(key)

    return policy


@struct.dataclass
class PlayAgainstState:
    env_state: Any
    seat: jax.Array  # int32[]: the learner's agent index in this episode


class PlayAgainst(Wrapper):
    """The learner plays seat ``seat`` of the turn-based ``env``; ``policy`` plays every other seat.

    Args:
        env: a jaxenvs environment with ``traits.dynamics == "sequential"``, two or more agents and
            a Discrete action space, without an AutoReset (build it with ``autoreset=False``; wrap
            this wrapper in `jaxenvs.wrappers.AutoReset` for auto-resets). Explicit chance nodes
            must be folded first (`jaxenvs.wrappers.FoldChanceNodes`).
        policy: ``policy(key, obs) -> action`` (int32[]), jittable, on ONE agent's observation (the
            agent to move: its slice of ``env``'s observation, ``obs["action_mask"]`` included);
            a name of the game's opponents (`jaxenvs.games.named_opponents`: ``"random"``,
            ``"perfect"`` for Tic-Tac-Toe, ``"heuristic"`` for Connect Four, ...); ``None``:
            `random_legal_policy`.
        seat: the learner's agent index, or ``"random"`` (uniform over the agents, drawn with the
            reset key for every episode; ``state.seat`` holds it).
        max_opponent_moves: a bound on the opponent moves made inside one call (the
            ``lax.while_loop``'s), for games where other agents may move several times in a row.

    ``reset`` resets ``env`` and lets the opponent move until it is the learner's turn (or the game
    ends); ``step(action)`` plays the learner's move (a scalar action, put in the learner's row of
    the joint action), then the opponent's moves until it is the learner's turn again or the game
    ends. The observation is the learner's slice of ``env``'s (``"action_mask"``: the learner's row
    of `jaxenvs.core.Environment.legal_action_mask`, all zero in a terminal state); ``reward`` the
    learner's, summed over the moves of the call (a win by the opponent is the learner's -1);
    ``terminated``/``truncated`` are set when any of those moves set them. ``info`` is the
    learner's move's, plus ``"opponent_illegal_action"`` (bool: an opponent's move in this call
    was illegal; the game ended, as ``env`` defines, in the learner's favour). Rewards of moves
    made inside ``reset`` (before the learner's first turn) are not reported.

    Traits: one agent, ``dynamics="simultaneous"``, ``utility="general_sum"``, ``chance="stochastic"``
    (the opponent and the seat draw randomness); ``action_style`` stays ``env``'s.
    """

    draws_in_step = True

    def __init__(self, env: Environment, policy: Policy | None = None, seat: int | str = 0, max_opponent_moves: int = 64):
        super().__init__(env)
        if env.traits.dynamics != "sequential" or not env.multi_agent:
            raise ValueError(
                f"PlayAgainst needs a turn-based env (traits.dynamics='sequential', two or more agents), got {env!r}"
            )
        if env.traits.chance == "explicit_stochastic":
            raise ValueError(
                f"PlayAgainst over {env!r}, which has explicit chance nodes: wrap it in "
                "jaxenvs.wrappers.FoldChanceNodes first, so that every state reached is a decision"
            )
        if has_wrapper(env, AutoReset):
            raise ValueError(
                f"PlayAgainst over {env!r}, which resets its episodes itself (an AutoReset inside): the opponent "
                "would play into the next episode. Build it with jaxenvs.make(id, autoreset=False) and put "
                "AutoReset outside: AutoReset(PlayAgainst(...))"
            )
        space = env.action_space(env.default_params)
        if not isinstance(space, spaces.Discrete):
            raise ValueError(f"PlayAgainst needs a Discrete action space, {env.name} has {space}")
        if seat != "random" and (not isinstance(seat, int) or isinstance(seat, bool) or not 0 <= seat < env.num_agents):
            raise ValueError(f"PlayAgainst seat must be an agent index in [0, {env.num_agents}) or 'random', got {seat!r}")
        if not isinstance(max_opponent_moves, int) or isinstance(max_opponent_moves, bool) or max_opponent_moves < 1:
            raise ValueError(f"PlayAgainst needs max_opponent_moves as an int >= 1, got {max_opponent_moves!r}")
        if isinstance(policy, str):  # a named opponent of the game (jaxenvs.games)

            named = named_opponents(env)
            if policy not in named:
                raise ValueError(f"PlayAgainst opponent {policy!r} is not one of {env.name}'s: "
                                 f"{allowed_opponents(env, runs=False)}")
            policy = named[policy].policy
        if policy is not None and not callable(policy):
            raise TypeError(f"PlayAgainst policy must be a callable policy(key, obs) -> action or an opponent's name, "
                            f"got {policy!r}")
        self.policy = random_legal_policy(space) if policy is None else policy
        self.seat = seat
        self.max_opponent_moves = max_opponent_moves

    @property
    def traits(self):
        return dataclasses.replace(
            self.env.traits, num_agents=1, dynamics="simultaneous", utility="general_sum", chance="stochastic"
        )

    def inner_state(self, state):
        return state.env_state

    # ---- the learner's view ----------------------------------------------------------------
    @staticmethod
    def _row(tree, i):
        return jax.tree.map(lambda leaf: leaf[i], tree)

    def legal_action_mask(self, state, params=None):
        """bool[n]: the learner's row of ``env``'s mask (all false while it is not its turn)."""
        return self.env.legal_action_mask(state.env_state, self._params(params))[state.seat]

    def current_player(self, state, params=None):
        return jnp.zeros((), jnp.int32)

    def is_chance_node(self, state, params=None):
        return jnp.zeros((), bool)

    # ---- the opponent's moves ----------------------------------------------------------------
    def _opponent(self, key, obs, state, seat, reward, terminated, truncated, params):
        """Opponent moves from ``state`` until the learner is to move or the episode ends."""
        joint_shape = self.env.batched_action_shape(params)

        def cond(carry):
            i, _, _, state, _, terminated, truncated, _ = carry
            theirs = self.env.current_player(state, params) != seat
            return theirs & ~terminated & ~truncated & (i < self.max_opponent_moves)

        def body(carry):
            i, key, obs, state, reward, terminated, truncated, illegal = carry
            key, key_act, key_step = jax.random.split(key, 3)
            player = self.env.current_player(state, params)
            move = jnp.asarray(self.policy(key_act, self._row(obs, player)), jnp.int32)
            action = jnp.zeros(joint_shape, jnp.int32).at[player].set(move)
            obs, state, r, term, trunc, info = self.env.step_env(key_step, state, action, params)
            illegal = illegal | info.get("illegal_action", jnp.zeros((), bool))
            return i + 1, key, obs, state, reward + r[seat], terminated | term, truncated | trunc, illegal

        carry = (jnp.int32(0), key, obs, state, reward, terminated, truncated, jnp.zeros((), bool))
        _, _, obs, state, reward, terminated, truncated, illegal = jax.lax.while_loop(cond, body, carry)
        return obs, state, reward, terminated, truncated, illegal

    def reset_env(self, key, params):
        key_seat, key_reset, key_opp = jax.random.split(key, 3)
        if self.seat == "random":
            seat = jax.random.randint(key_seat, (), 0, self.env.num_agents, dtype=jnp.int32)
        else:
            seat = jnp.int32(self.seat)
        obs, state = self.env.reset_env(key_reset, params)
        flag = jnp.zeros((), bool)
        obs, state, *_ = self._opponent(key_opp, obs, state, seat, jnp.zeros((), jnp.float32), flag, flag, params)
        return self._row(obs, seat), PlayAgainstState(state, seat)

    def step_env(self, key, state, action, params):
        key_step, key_opp = jax.random.split(key)
        seat = state.seat
        joint = jnp.zeros(self.env.batched_action_shape(params), jnp.int32).at[seat].set(jnp.asarray(action, jnp.int32))
        obs, inner, reward, terminated, truncated, info = self.env.step_env(key_step, state.env_state, joint, params)
        obs, inner, reward, terminated, truncated, illegal = self._opponent(
            key_opp, obs, inner, seat, reward[seat], terminated, truncated, params
        )
        info = {**info, "opponent_illegal_action": illegal}
        return self._row(obs, seat), PlayAgainstState(inner, seat), reward, terminated, truncated, info
