"""Shared by the turn-based games' tests: a lockstep replay of recorded action sequences, and
`c4_obs`, a Connect Four observation built from piece lists.

`replay(env, actions)` runs ``actions`` (int32[games, plies, num_agents], joint actions) through
``env`` (made with ``autoreset=False``) in one jitted ``vmap(scan)`` and returns, per ply, what
the differential tests compare against the original implementation: the observation and state
after the move, reward, terminated, current player, legal-action mask and ``info``.
"""

from __future__ import annotations

import functools

import jax
import numpy as np


@functools.lru_cache(maxsize=None)
def _replay_fn(env):
    def one_game(key, actions):
        obs0, state0 = env.reset(key)

        def body(state, xs):
            k, action = xs
            obs, state, reward, terminated, truncated, info = env.step(k, state, action)
            out = {
                "obs": obs,
                "reward": reward,
                "terminated": terminated,
                "truncated": truncated,
                "player": env.current_player(state),
                "mask": env.legal_action_mask(state),
                "info": info,
                "state": state,
            }
            return state, out

        keys = jax.random.split(key, actions.shape[0])
        _, traj = jax.lax.scan(body, state0, (keys, actions))
        first = {"obs": obs0, "player": env.current_player(state0), "mask": env.legal_action_mask(state0), "state": state0}
        return first, traj

    return jax.jit(jax.vmap(one_game))


def replay(env, actions, seed: int = 0):
    """``(first, traj)`` as host numpy trees: ``first`` after reset (``[games, ...]``), ``traj``
    after each ply (``[games, plies, ...]``)."""
    actions = np.asarray(actions, np.int32)
    keys = jax.random.split(jax.random.key(seed), actions.shape[0])
    first, traj = _replay_fn(env)(keys, actions)
    return jax.tree.map(np.asarray, first), jax.tree.map(np.asarray, traj)


def play_pettingzoo(pz, n_games: int, illegal_prob: float, seed: int = 0):
    """Random games of the PettingZoo AEC env ``pz`` (two agents, standard wrappers, so an illegal
    move ends the game): per game ``(start, plies)``, the observations and masks after reset and a
    record per ply of the mover, its action, whether it was illegal (a masked-out action, played
    with probability ``illegal_prob`` where one exists), both agents' observations and masks,
    rewards, the end of the game and the next agent."""
    rng = np.random.default_rng(seed)
    agents = pz.possible_agents

    def observe():
        views = [pz.observe(a) for a in agents]
        return [v["observation"] for v in views], [v["action_mask"] for v in views]

    games = []
    for g in range(n_games):
        pz.reset(seed=g)
        obs, mask = observe()
        start = {"obs": obs, "mask": mask}
        plies = []
        while True:
            mover = agents.index(pz.agent_selection)
            legal_mask = pz.observe(pz.agent_selection)["action_mask"]
            legal, masked = np.flatnonzero(legal_mask), np.flatnonzero(legal_mask == 0)
            illegal = len(masked) > 0 and rng.random() < illegal_prob
            action = int(rng.choice(masked if illegal else legal))
            pz.step(action)
            done = any(pz.terminations.values()) or any(pz.truncations.values())
            obs, mask = observe()
            plies.append(
                {
                    "mover": mover,
                    "action": action,
                    "illegal": illegal,
                    "obs": obs,
                    "mask": mask,
                    "rewards": [pz.rewards[a] for a in agents],
                    "done": done,
                    "next": agents.index(pz.agent_selection),
                }
            )
            if done:
                break
        games.append((start, plies))
    return games


def joint_actions(games, max_plies: int, num_actions: int, seed: int = 1) -> np.ndarray:
    """int32[games, max_plies, 2]: each ply's move in the mover's row, garbage (out of range too)
    in the other row, which the port must ignore."""
    rng = np.random.default_rng(seed)
    actions = rng.integers(-3, num_actions + 3, size=(len(games), max_plies, 2)).astype(np.int32)
    for g, (_, plies) in enumerate(games):
        for t, ply in enumerate(plies):
            actions[g, t, ply["mover"]] = ply["action"]
    return actions


def assert_lockstep(games, first, traj) -> tuple[int, int]:
    """Assert that the replayed port (``first``, ``traj`` from `replay`) reproduces the PettingZoo
    games ply by ply; return (illegal moves, plies) compared. PettingZoo's TerminateIllegalWrapper
    gives the other agent 0 after an illegal move; the port gives it +1 (zero-sum)."""
    n_illegal = n_plies = 0
    for g, (start, plies) in enumerate(games):
        np.testing.assert_array_equal(first["obs"]["observation"][g], np.stack(start["obs"]))
        np.testing.assert_array_equal(first["mask"][g], np.stack(start["mask"]) == 1)
        np.testing.assert_array_equal(first["obs"]["action_mask"][g], np.stack(start["mask"]))
        assert first["player"][g] == 0
        for t, ply in enumerate(plies):
            at = f"game {g} ply {t}"
            np.testing.assert_array_equal(traj["obs"]["observation"][g, t], np.stack(ply["obs"]), err_msg=at)
            assert bool(traj["terminated"][g, t]) == ply["done"], at
            assert not traj["truncated"][g, t], at
            assert bool(traj["info"]["illegal_action"][g, t]) == ply["illegal"], at
            mover, other = ply["mover"], 1 - ply["mover"]
            reward = traj["reward"][g, t]
            assert reward[mover] == ply["rewards"][mover], at
            assert reward[other] == (1.0 if ply["illegal"] else ply["rewards"][other]), at
            if not ply["done"]:
                assert traj["player"][g, t] == ply["next"], at
                np.testing.assert_array_equal(traj["mask"][g, t], np.stack(ply["mask"]) == 1, err_msg=at)
            else:
                assert not traj["mask"][g, t].any(), at
            np.testing.assert_array_equal(traj["obs"]["action_mask"][g, t], traj["mask"][g, t].astype(np.uint8))
            n_illegal += ply["illegal"]
            n_plies += 1
    return n_illegal, n_plies


def lockstep_counts(env, classic: str, n_games: int, illegal_prob: float, max_plies: int,
                    num_actions: int) -> tuple[list, int, int]:
    """``(games, illegal moves, plies)``: ``n_games`` games of PettingZoo's ``classic`` game (e.g.
    ``"tictactoe_v3"``, `play_pettingzoo`) replayed by ``env`` and checked ply by ply (`assert_lockstep`)."""
    from jaxenvs.adapters.pettingzoo import classic_env

    games = play_pettingzoo(classic_env(classic), n_games, illegal_prob)
    first, traj = replay(env, joint_actions(games, max_plies, num_actions))
    return (games, *assert_lockstep(games, first, traj))


def play_moves(env, moves, idle: int) -> list[tuple]:
    """Step a fresh two-player game through ``moves`` (agents alternating from agent 0; the
    non-mover's row holds ``idle``): per step ``(obs, state, reward, terminated, illegal)``."""
    import jax.numpy as jnp

    obs, state = env.reset(jax.random.key(0))
    out = []
    for i, m in enumerate(moves):
        action = jnp.array([m, idle] if i % 2 == 0 else [idle, m], jnp.int32)
        obs, state, reward, terminated, _, info = env.step(jax.random.key(0), state, action)
        out.append((obs, state, np.asarray(reward), bool(terminated), bool(info["illegal_action"])))
    return out


def c4_obs(mine, theirs):
    """A Connect Four observation of the agent to move: its pieces at the ``(row, col)`` cells of
    ``mine``, the opponent's at ``theirs`` (row 0 at the top), the mask the columns with room."""
    b = np.zeros((6, 7, 2), np.int32)
    for r, c in mine:
        b[r, c, 0] = 1
    for r, c in theirs:
        b[r, c, 1] = 1
    return {"observation": b, "action_mask": (b[0].sum(-1) == 0).astype(np.uint8)}
