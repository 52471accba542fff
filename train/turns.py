"""Who acts in each batch row and how its returns are credited: the trainer's turn strategy
(`train.base.Trainer.turns`). Two strategies share one interface, so the rollout, the losses and
the metrics carry no branches:

* `EveryRow` (single-agent and simultaneous-move environments): every row acts at every step.
  No mask and no ``acting`` flags (``None``: `train.masking`'s helpers read ``acting=None`` as
  "every row" and compute the plain means), `gae`, no extra metrics, and the key stream every
  such run has always used.
* `SelfPlay` (turn-based games, observations holding ``"action_mask"``: `TicTacToe-v0`,
  `ConnectFour-v0`, `KuhnPoker-v0`), the option PPO takes (`train.ppo.PPOTrainer.make_turns`):
  a `train.masking.MaskedCategorical` policy over the legal actions of each row. The rollout
  stores the mask and an ``acting`` flag per row (the row's agent has a legal action: it is its
  turn; non-movers, chance plies and terminal states do not act); the losses average over acting
  rows only, and returns are credited to each seat's own decisions by `gae_decisions` (self-play:
  one shared policy plays every seat from that seat's observation). ``mask_actions=False`` (an
  ablation) keeps the policy over all actions; ``acting`` still comes from the mask. Every update
  also reports ``illegal_rate`` and, with ``match_games > 0``, the greedy policy's
  win/draw/loss per seat against random-legal play.

  Opponents are the current policy (self-play) and, with ``random_opponents`` (a fraction of the
  envs), the config's ``training_opponents`` (`train.league`): in those envs one seat (seat
  ``e % num_agents`` of env ``e``, so the learner meets it from every seat) is played by the
  opponent and its rows never act in the losses (`SelfPlay.opponent_rows`). No pool of past
  checkpoints: a pool would carry K copies of the parameters in the runner state (and in every
  checkpoint) and run K network passes per step to let each seat's row pick its opponent, several
  times the rollout's cost; Tic-Tac-Toe and Kuhn poker reach their bars in pure self-play (a
  strong entropy bonus keeps the policy exploring), Connect Four with opponents (see `train.tuned`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import prng, spaces
import jaxenvs
from jaxenvs.games import random_legal, versus
from . import league
from .gae import gae, gae_decisions
from .masking import MaskedCategorical

__all__ = ["EveryRow", "SelfPlay", "has_action_mask"]


def has_action_mask(env, params, env_id: str) -> bool:
    """Whether ``env``'s observations hold an ``"action_mask"`` (a turn-based game); a ValueError
    when its action space cannot be masked (not Discrete, or not starting at 0)."""
    obs_space, act_space = env.observation_space(params), env.action_space(params)
    if not (isinstance(obs_space, spaces.Dict) and "action_mask" in obs_space.keys()):
        return False
    if not isinstance(act_space, spaces.Discrete):
        raise ValueError(f"{env_id}: an action mask needs a Discrete action space")
    if act_space.start != 0:
        raise ValueError(f"{env_id}: an action mask needs a Discrete action space starting at 0")
    return True


class EveryRow:
    """Every row acts at every step (single-agent and simultaneous-move environments)."""

    turn_based = False
    opponent_rows = None  # bool[batch_size] of the rows an opponent plays, or None
    match_env = None  # the environment without auto-reset of the per-update matches, or None

    def distribution(self, trainer, out, mask):
        """The action distribution of the network's policy outputs ``out``."""
        if mask is not None:
            raise ValueError(f"{trainer.config.env_id} has no action mask; call policy without one")
        return trainer.dist_fn(out)

    def row_mask(self, obs):
        """bool[rows, n]: the legal actions of each row of a batch of raw observations; None here."""
        return None

    def sample(self, trainer, key, dist, obs, mask):
        """``(actions, acting)`` of one rollout step: the policy's sample in every row, and which
        rows made a decision (None: all of them)."""
        return dist.sample(key), None

    def step_stats(self, mask, info, terminated) -> tuple:
        """What a rollout step records beside the episode statistics (nothing here)."""
        return ()

    def advantages(self, traj, next_values, hp):
        """``(advantages, value targets)`` [T, B] of a rollout: `gae`."""
        return gae(traj.reward, traj.value, next_values, traj.terminated, traj.truncated, hp.gamma, hp.gae_lambda)

    def split_update_key(self, key):
        """``(next runner key, the update's key, the metrics' key or None)``: one split, the key
        stream plain runs have always used."""
        key, k_upd = prng.split(key)
        return key, k_upd, None

    def update_metrics(self, trainer, params, key, stats) -> dict:
        """An update's extra metrics from the new ``params`` and the rollout's `step_stats`."""
        return {}

    @property
    def max_plies(self) -> int:
        """Steps after which a game of the per-update matches is cut (the spec's time limit)."""
        spec = getattr(self.match_env, "spec", None)
        return int(getattr(spec, "max_episode_steps", None) or 1000)


class SelfPlay(EveryRow):
    """Turn-based self-play: a masked policy, acting rows, decision-level GAE, opponent rows and
    per-update matches (the module docstring). Built from the config's ``mask_actions``,
    ``match_games`` and ``random_opponents`` (`train.ppo.PPOTrainer.make_turns`)."""

    turn_based = True

    def __init__(self, config, num_agents: int, mask_actions: bool = True, match_games: int = 0,
                 random_opponents: float = 0.0):
        self.mask_actions, self.match_games = bool(mask_actions), int(match_games)
        self.match_env = jaxenvs.make(config.env_id, autoreset=False, **config.env_kwargs)
        # env e of the first round(fraction * num_envs) has an opponent in seat e % num_agents
        n_envs = int(round(float(random_opponents) * config.num_envs))
        if n_envs:
            rows = np.zeros((config.num_envs, num_agents), bool)
            rows[np.arange(n_envs), np.arange(n_envs) % num_agents] = True
            self.opponent_rows = rows.reshape(-1)

    def distribution(self, trainer, out, mask):
        """A `MaskedCategorical` over the legal actions ``mask`` (all actions when ``mask`` is
        None or ``mask_actions`` is off: the ablation)."""
        return MaskedCategorical(out, mask if self.mask_actions else None)

    def row_mask(self, obs):
        """bool[rows, n]: ``obs["action_mask"]``, one row per agent per environment."""
        m = jnp.asarray(obs["action_mask"]) != 0
        return m.reshape((-1, m.shape[-1]))

    def sample(self, trainer, key, dist, obs, mask):
        """The policy's sample, and the opponents' moves in their rows (`train.league`); acting:
        the rows with a legal action, less the opponents'."""
        acting = mask.any(-1)
        if self.opponent_rows is None:
            return dist.sample(key), acting
        k_act, k_opp = prng.split(key)
        sample = jnp.where(self.opponent_rows, league.opponent_actions(trainer, k_opp, obs, mask), dist.sample(k_act))
        return sample, acting & ~self.opponent_rows

    def step_stats(self, mask, info, terminated) -> tuple:
        """(decisions made, illegal moves: ``info["illegal_action"]``) in this step, summed over envs."""
        illegal = info["illegal_action"] if "illegal_action" in info else jnp.zeros(terminated.shape, bool)
        return jnp.sum(mask.any(-1)), jnp.sum(illegal)

    def advantages(self, traj, next_values, hp):
        """`gae_decisions`: each seat's returns credited to its own decisions."""
        return gae_decisions(traj.reward, traj.value, next_values, traj.terminated, traj.truncated, traj.acting,
                             hp.gamma, hp.gae_lambda)

    def split_update_key(self, key):
        key, k_upd, k_match = prng.split(key, 3)
        return key, k_upd, k_match

    def update_metrics(self, trainer, params, key, stats) -> dict:
        """``illegal_rate`` (illegal moves / decisions in the rollout; exactly 0 with masking) and,
        with ``match_games > 0``, ``win_seat{i}``, ``draw_seat{i}``, ``loss_seat{i}``: the GREEDY
        policy (the one evaluations judge) in seat ``i`` against random-legal play in the others,
        over ``match_games`` games per seat (`jaxenvs.games.versus`, inside the compiled update)."""
        decisions, illegal = stats
        out = dict(illegal_rate=illegal.sum().astype(jnp.float32) / jnp.maximum(decisions.sum(), 1).astype(jnp.float32))
        if self.match_games > 0:
            res = versus(self.match_env, trainer.agent_policy(params, greedy=True), random_legal, key,
                         self.match_games, max_plies=self.max_plies)
            for i in range(trainer.num_agents):
                out.update({f"{k}_seat{i}": res[k][i] for k in ("win", "draw", "loss")})
        return out
