"""`verify_port`: does a jaxenvs environment behave like the environment it was ported from?

The verdict is `"pass"`, `"fail"` or `"inconclusive"`, never a pass that the sample could not have
failed. The run reads as phases:

1. **spaces** -- the reference's spaces converted with `jaxenvs.spaces.from_gymnasium` equal the
   port's (or, with `obs_to_jax`/`action_to_reference`, every converted value lies in the other
   side's space);
2. **port run** -- `num_episodes` episodes of the port in one compiled call (vmapped episodes, a
   while loop over steps), without its auto-reset, with one policy;
3. **reference run** -- the same episodes of the reference (`jaxenvs.testing.reference`), the
   policy fed the reference's observations with the same keys;
4. **comparison**, tier by tier, strongest first (each `Statistic` names its tier):
   - *exact* (with `state_to_jax` and a port whose traits say `chance="deterministic"`): the port
     steps from reference states and replays every reference trajectory (its initial state and
     actions); observation, reward and flags must agree (floats within `rtol`/`atol`, see
     `RTOL`, `REPLAY_RTOL`);
   - *model* (the reference exposes an exact transition table, as Gymnasium's toy-text envs'
     `env.unwrapped.P`, or `transition_probs=` is given; integer observations and actions): the
     port is stepped many times from its own states for every observation it reaches and every
     action, and each `(observation, action)` distribution of `(next observation, reward,
     terminated)` is tested against the exact probabilities (an outcome of probability 0 fails
     at once); the initial observation against the table's initial distribution;
   - *sample*: two-sample tests of the initial observation, episode length, outcome, return and,
     for discrete observations and actions, the next observation and reward per `(observation,
     action)` (`jaxenvs.testing.stats`: Fisher or chi-square; Kolmogorov-Smirnov).
5. **verdict** -- each statistic is judged at `threshold = alpha / (m * rounds)` (Bonferroni over
   the `m` statistics and the sampling rounds the budget allows): any rejection fails. Otherwise
   every *required* statistic must be able to detect an effect of size `detect` (total variation
   for distributions of categories, Kolmogorov-Smirnov distance for real values) with
   probability `power`; where the sample is too small the port and reference are run for more
   episodes (doubling, up to `max_episodes`), model draws and initial observations are topped up
   (up to `MAX_DRAWS`), and what still falls short makes the run inconclusive, naming the
   episodes it would need. Statistics whose behaviour a stronger tier already covers (episode
   statistics once transitions and the initial distribution are exact or model-checked) are
   *supporting*: they can fail the run but do not hold it up.

A turn-based reference -- a `pettingzoo.AECEnv` or a `pyspiel.Game` -- takes another road
(`jaxenvs.testing.lockstep`): the reference plays whole games with random legal moves (and illegal ones
where it defines them), the port replays them in one compiled call, and the mover, the legal-action
mask, each agent's observation, rewards and flags (and, for OpenSpiel, the chance outcomes and
their probabilities and the returns) are compared exactly at every ply: statistics of the exact
tier, and a verdict of pass or fail.

The checker's modules, one per part: `jaxenvs.testing.runs` (constants, policies, the port's
compiled programs), `jaxenvs.testing.verdict` (`Pending`: a statistic before its level is
known), `jaxenvs.testing.exact`, `jaxenvs.testing.model`, `jaxenvs.testing.from_state` and
`jaxenvs.testing.sample` (the tiers), `jaxenvs.testing.lockstep` (turn-based references), and
this module (the phases and the verdict). None imports another's private names.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any, Callable

import jax
import numpy as np

from jaxenvs import spaces
from jaxenvs._optional import require
from jaxenvs._fast_compile import fast_jit as _fast_jit
from jaxenvs.core import Environment
from jaxenvs.testing.exact import replay_trajectories, state_template, step_from_states
from jaxenvs.testing.from_state import from_state_statistic
from jaxenvs.testing.lockstep import (
    CHANCE_TRIES, ILLEGAL_PROB, games_needed, is_aec_env, is_openspiel_game, verify_turn_based,
)
from jaxenvs.testing.model import model_initial, model_transitions
from jaxenvs.testing.reference import (
    CHUNK, FIRST_CHUNK, AECReference, GymReference, OpenSpielReference, PgxReference, ReferenceCache, Side, TransitionModel,
    is_pgx_env,
)
from jaxenvs.testing.report import PortInconclusive, PortMismatch, PortReport, Statistic
from jaxenvs.testing.runs import (
    ALPHA, BUDGET_S, CONTAINS, WALL_FACTOR, Budget, DEFAULT_POLICIES, DETECT, FROM_STATE_DRAWS, HORIZON, MAX_DRAWS, MAX_EPISODES,
    MAX_FROM_STATES, MAX_STATES, PORT_CHUNK, POWER, RESAMPLES, UserPolicy, batched_policy_fn, compiled, default_policy, policy_block_fn,
    flat, is_parallel_env, port_reset_fn, port_rollout_fn, rebuild_state, ref_contains, same_space, time_limit, to_python,
)
from jaxenvs.testing.sample import episode_statistics, initial_statistics, local_statistic, transition_statistics
from jaxenvs.testing.verdict import COVERAGE, DETECT_LOCAL, Pending, VerifySettings, conclude
from jaxenvs.wrappers.base import AutoReset, has_wrapper, strip_autoreset


__all__ = [
    "verify_port", "PortMismatch", "PortInconclusive", "PortReport", "Statistic", "ReferenceCache", "ALPHA", "DETECT",
    "POWER", "MAX_EPISODES", "BUDGET_S", "WALL_FACTOR", "MAX_DRAWS", "HORIZON", "MAX_STATES", "RESAMPLES", "ILLEGAL_PROB",
    "CHANCE_TRIES", "games_needed", "COVERAGE", "DETECT_LOCAL", "VerifySettings",
]


def _check_in_space(space, stacked_obs, lead: int, converted):
    """Raise unless every row of `stacked_obs` (the reference's initial observations, then its
    last ones) lies in the port's observation `space`."""
    contains = space.contains
    for _ in range(1 + lead):
        contains = jax.vmap(contains)
    fn = CONTAINS.get((repr(space), lead))
    if fn is None:
        fn = CONTAINS[(repr(space), lead)] = _fast_jit(contains)
    ok = np.asarray(fn(stacked_obs))
    ok = ok.reshape(ok.shape[0], -1).all(axis=1)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        bad = jax.tree.map(lambda x: np.asarray(x[i]).tolist(), stacked_obs)
        how = "obs_to_jax(reference observation)" if converted else "reference observation"
        n = len(ok) // 2
        what = f"initial observation of reference episode {i}" if i < n else f"last observation of reference episode {i - n}"
        raise PortMismatch("observation space", f"{what}: {how} = {bad} is not in the port's {space!r}")


def _check_args(env, reference, policy, reference_cache, ints, budget_s):
    """Raise on a bad argument of `verify_port`, saying what was wrong and what is allowed."""
    for name, v, lo in ints:
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < lo:
            raise ValueError(f"verify_port needs {name} as an int >= {lo}, got {v!r}")
    (_, num_episodes, _), _, (_, max_episodes, _) = ints
    if max_episodes < num_episodes:
        raise ValueError(f"verify_port needs max_episodes >= num_episodes, got {max_episodes} < {num_episodes}")
    if not isinstance(budget_s, (int, float)) or isinstance(budget_s, bool) or not budget_s > 0 or budget_s != budget_s:
        raise ValueError(f"verify_port needs budget_s as a number of seconds > 0 (CPU seconds), got {budget_s!r}")
    if not isinstance(env, Environment):
        raise TypeError(f"verify_port checks a jaxenvs Environment, got {type(env).__name__}")
    if not (callable(reference) or is_openspiel_game(reference) or is_pgx_env(reference)):
        raise TypeError(
            "verify_port needs reference as a zero-argument callable returning a gymnasium.Env, "
            "pettingzoo.ParallelEnv or pettingzoo.AECEnv (e.g. lambda: gymnasium.make(...)), or a pyspiel.Game, "
            f"got {type(reference).__name__}"
        )
    if reference_cache is not None and not isinstance(reference_cache, ReferenceCache):
        raise TypeError(f"verify_port needs reference_cache as a ReferenceCache, got {type(reference_cache).__name__}")
    if policy is not None and not callable(policy):
        raise TypeError(f"verify_port needs policy as a callable (key, obs) -> action, got {type(policy).__name__}")
    if has_wrapper(strip_autoreset(env), AutoReset):
        raise ValueError("verify_port needs AutoReset outermost (or absent): it checks episodes that end")


def _settings(settings, **given) -> VerifySettings:
    """`settings`, or the `VerifySettings` of the keyword arguments given (None: the default)."""
    named = sorted(k for k, v in given.items() if v is not None)
    if settings is None:
        return VerifySettings(**{k: given[k] for k in named})
    if not isinstance(settings, VerifySettings):
        raise TypeError(f"verify_port needs settings as a VerifySettings, got {type(settings).__name__}")
    if named:
        raise ValueError(f"verify_port takes settings= or {', '.join(k + '=' for k in named)}, not both (set them in "
                         "the VerifySettings)")
    return settings


def _turn_based_reference(reference, probe, given: dict):
    """The lockstep reference of a turn-based `probe` (OpenSpiel, Pgx or AEC); raise when an
    argument of the Gymnasium road (`given`) is set."""
    unused = sorted(k for k, v in given.items() if v is not None)
    if unused:
        raise ValueError(f"verify_port: {', '.join(unused)} cannot be used with a turn-based reference (a "
                         "pettingzoo.AECEnv, pyspiel.Game or Pgx env): its games are replayed move for move, actions and "
                         "observations compared as they are")
    if is_openspiel_game(probe):
        return OpenSpielReference(probe)
    return PgxReference(probe) if is_pgx_env(probe) else AECReference(reference, probe)


def _check_spaces(env, params, probe, obs_to_jax, action_to_reference):
    """Phase 1: the reference's agents and spaces against the port's; returns `(agents,
    reference action space, notes)`."""
    multi, num_agents = env.multi_agent, env.num_agents
    if isinstance(probe, type) or not hasattr(probe, "reset"):
        raise TypeError(f"verify_port: reference() returned {probe!r}, not an environment with reset and step")
    ref_multi = is_parallel_env(probe)
    if ref_multi != multi:
        raise ValueError(
            f"verify_port: the port has {num_agents} agent(s) but the reference is a "
            f"{'pettingzoo ParallelEnv' if ref_multi else 'gymnasium.Env'}; a multi-agent port needs a ParallelEnv"
        )
    agents = list(probe.possible_agents) if multi else []
    if multi and len(agents) != num_agents:
        raise PortMismatch("agents", f"port has {num_agents} agents, reference {len(agents)} ({agents})")
    ref_act_space = (probe.action_space(agents[0]) if multi else probe.action_space)
    ref_obs_space = (probe.observation_space(agents[0]) if multi else probe.observation_space)
    notes = []
    for which, port_space, ref_space, converted in (
        ("observation space", env.observation_space(params), ref_obs_space, obs_to_jax),
        ("action space", env.action_space(params), ref_act_space, action_to_reference),
    ):
        if converted is not None:
            notes.append(f"{which}: checked through the conversion on every sample")
            continue
        try:
            ref_as_jax = spaces.from_gymnasium(ref_space)
        except (TypeError, ImportError) as e:
            raise PortMismatch(which, f"the reference's {ref_space!r} has no jaxenvs equivalent ({e}); pass a conversion") from e
        if not same_space(port_space, ref_as_jax):
            raise PortMismatch(which, f"port {port_space!r}, reference {ref_space!r}")
        notes.append(f"{which}: {port_space!r} == reference {ref_space!r}")
    return agents, ref_act_space, notes


def _check_step_shapes(env, reward, terminated, truncated) -> None:
    """The port's reward and flags (their shapes, from one traced step) have the shapes every
    reference step has: a reward per step (one per agent for a multi-agent port) and one terminated
    and one truncated flag per episode. A reward of shape (1,) -- a batch axis where none belongs,
    which ``vmap`` turns into [B, 1] -- is a mismatch, not something to squeeze."""
    lead = (env.num_agents,) if env.multi_agent else ()
    if reward.shape != lead:
        want = f"[{env.num_agents}] (one per agent)" if lead else "a scalar"
        raise PortMismatch("reward shape", f"the port's step returns a reward of shape {reward.shape}; the reference's "
                                           f"is {want}, one value per step")
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if flag.shape != ():
            raise PortMismatch(f"{name} shape", f"the port's step returns {name} of shape {flag.shape}; the reference's "
                                                 "is one flag per episode (a scalar)")


POLICY_BLOCK = 32  # steps of the default policy's actions computed in one call for the reference's episodes


class _GymRun:
    """Phases 2 and 3: the port's and a Gymnasium (or ParallelEnv) reference's episodes under one
    policy, the reference states `state_to_jax` maps, and the statistics of every tier over them."""

    def __init__(self, env, reference, probe, seed, policy, conversions, reference_cache, settings: VerifySettings,
                 budget):
        self.budget, self.settings = budget, settings
        self.state_to_jax, self.obs_to_jax, self.action_to_reference = conversions
        self.env, self.params, self.reference, self.seed = env, env.default_params, reference, seed
        self.reference_cache = reference_cache
        self.horizon = time_limit(env) or HORIZON
        self.multi, num_agents = env.multi_agent, env.num_agents
        self.stochastic = env.unwrapped.traits.chance != "deterministic"
        self.agents, self.ref_act_space, self.space_notes = _check_spaces(
            env, self.params, probe, self.obs_to_jax, self.action_to_reference)
        self.obs_space, self.act_space = env.observation_space(self.params), env.action_space(self.params)
        key = self.key = jax.random.key(seed)
        pol = self.pol = (UserPolicy(policy) if policy is not None else DEFAULT_POLICIES.setdefault(
            (repr(self.act_space), num_agents, self.multi), default_policy(self.act_space, num_agents, self.multi)))
        self.rollout = compiled("rollout", port_rollout_fn, env, pol, self.horizon, False)
        def first_step():  # traced once: the observation's and action's templates, the step's shapes
            obs, state = env.reset(key, self.params)
            action = pol(key, key, obs)
            return obs, action, env.step(key, state, action, self.params)[2:5]

        obs0_aval, act_aval, step_avals = jax.eval_shape(first_step)
        _check_step_shapes(env, *step_avals)
        obs_template = jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), obs0_aval)
        self.act_template = np.zeros(jax.tree.leaves(act_aval)[0].shape, jax.tree.leaves(act_aval)[0].dtype)
        self.obs_treedef, self.t_leaves = jax.tree.structure(obs_template), jax.tree.leaves(obs_template)
        self.discrete_obs = all(x.dtype.kind in "iub" for x in self.t_leaves)
        self.discrete_act = isinstance(self.act_space, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary))
        self.splits = np.cumsum([x.size for x in self.t_leaves])[:-1]
        # one array leaf (a Discrete or Box observation): converted without the tree machinery
        self.one_leaf = self.obs_to_jax is None and not self.multi and self.obs_treedef == jax.tree.structure(0)
        self.ref = GymReference(reference, probe, self.multi, self.convert_obs, self.convert_action, self.check_action)
        self.policy_batch = batched_policy_fn(pol)
        # the default policy reads an observation only for its action mask: without one, the reference
        # episodes' actions for POLICY_BLOCK steps come from one call (the same values, step by step)
        masked = isinstance(obs0_aval, Mapping) and "action_mask" in obs0_aval
        self.policy_block = policy_block_fn(pol) if policy is None and not masked else None
        self.blocks: dict = {}
        self.rng = np.random.default_rng([seed, 1])
        self.shapes = (sum(x.size for x in self.t_leaves), self.act_template.size, num_agents if self.multi else 1)
        self.cache_notes, self.initial_draws, self.recorded_eps = [], {}, 0

    def port_episodes(self, start: int, count: int, chunk: int) -> Side:
        """Episodes `start .. start + count - 1`, `chunk` at a time: one compiled shape serves
        every round."""
        parts = []
        for lo in range(0, count, chunk):
            m = min(chunk, count - lo)
            obs0, (o, a, no, r, te, tr, al) = self.rollout(self.params, self.key, start + lo, chunk)
            used = np.flatnonzero(np.asarray(al)[:m].any(axis=0))  # steps past every episode's end are not kept
            t = int(used[-1]) + 1 if len(used) else 1
            cut = lambda x: np.asarray(x)[:m, :t]  # noqa: E731
            parts.append(Side(flat(jax.tree.map(lambda x: np.asarray(x)[:m], obs0), 1), flat(jax.tree.map(cut, o), 2),
                              flat(jax.tree.map(cut, a), 2), flat(jax.tree.map(cut, no), 2),
                              np.asarray(r, np.float64)[:m, :t].reshape(m, t, -1), cut(te), cut(tr), cut(al)))
        return parts[0] if len(parts) == 1 else Side.concat(parts)

    def convert_obs(self, o) -> np.ndarray:
        """A reference observation as the port's, flattened to float64[D]."""
        if self.one_leaf and isinstance(o, (int, np.integer, np.ndarray)) and not isinstance(o, bool):
            tl = self.t_leaves[0]
            x = np.asarray(o, tl.dtype)
            if x.shape == tl.shape:
                return x.astype(np.float64).reshape(-1)
        if self.obs_to_jax is not None:
            o = self.obs_to_jax(o)
        elif self.multi:
            o = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *[o[a] for a in self.agents])
        leaves, treedef = jax.tree.flatten(o)
        if treedef != self.obs_treedef:
            raise PortMismatch("observation structure",
                               f"port observations are {self.obs_treedef}, the reference's (converted) {treedef}")
        flat = []
        for x, tl in zip(leaves, self.t_leaves):
            x = np.asarray(x, tl.dtype)
            if x.shape != tl.shape:
                raise PortMismatch("observation structure", f"port observation leaf of shape {tl.shape}, reference {x.shape}")
            flat.append(x.ravel())
        return np.concatenate(flat).astype(np.float64)

    def unflatten(self, rows: np.ndarray):
        parts = np.split(rows, self.splits, axis=1)
        return jax.tree.unflatten(self.obs_treedef, [p.reshape((len(rows),) + tl.shape).astype(tl.dtype)
                                                     for p, tl in zip(parts, self.t_leaves)])

    def convert_action(self, a):
        if self.action_to_reference is not None:
            return self.action_to_reference(a)
        return {ag: to_python(a[i]) for i, ag in enumerate(self.agents)} if self.multi else to_python(a)

    def check_action(self, a, a_ref):
        if self.action_to_reference is not None and not ref_contains(self.ref_act_space, a_ref, self.agents):
            raise PortMismatch("action space",
                               f"action_to_reference({a!r}) = {a_ref!r} is not in the reference's {self.ref_act_space!r}")

    def act(self, t, rows, start, count):
        if self.policy_block is None:
            return np.asarray(jax.tree.leaves(self.policy_batch(self.key, t, self.unflatten(rows), start, count))[0])
        t0, block = self.blocks.get((start, count), (None, None))
        if t0 is None or not t0 <= t < t0 + POLICY_BLOCK:
            t0 = t
            block = np.asarray(jax.tree.leaves(self.policy_block(self.key, t0, self.unflatten(rows), start, count,
                                                                 POLICY_BLOCK))[0])
            self.blocks = {(start, count): (t0, block)}
        return block[t - t0]

    def reference_episodes(self, start: int, stop: int, wanted: dict, resamples: int, least: int = 0):
        """The reference's episodes `start .. stop - 1` and its states at the `wanted` steps (from
        the ReferenceCache when it holds them); fewer (a prefix, at least `least`) when the budget
        ends first."""
        cache, cache_key = self.reference_cache, None
        if cache is not None:
            cache_key = (self.reference, self.ref.fingerprint(), self.state_to_jax, self.obs_to_jax,
                         self.action_to_reference, self.pol, self.seed, self.horizon, start, stop, resamples,
                         tuple(sorted((k, tuple(sorted(v))) for k, v in wanted.items())))
            hit = cache.get(cache_key)
            if hit is not None:
                self.cache_notes.append(f"episodes {start}..{stop - 1}")
                return hit
        out = self.ref.run(self.seed, start, stop, self.horizon, self.act, self.shapes, wanted, self.state_to_jax,
                           resamples, self.rng, self.budget, least)
        if cache_key is not None and len(out[0]) == stop - start:  # a run the budget cut short is not kept
            cache.put(cache_key, out)
        return out

    def wanted_for(self, start: int, stop: int, have: int) -> dict:
        """Every step of episodes `start .. stop - 1` (the from-state tier), up to MAX_FROM_STATES."""
        room = MAX_FROM_STATES - have
        if room <= 0:
            return {}
        per = max(1, room // max(stop - start, 1))
        return {i: set(range(min(self.horizon, per))) for i in range(start, stop)}

    def first_wanted(self, num_episodes: int) -> dict:
        """Which reference steps of the first round `state_to_jax` maps: every step (the from-state
        tier), or t = 0 of every episode (deterministic: each trajectory is replayed) and 4 random
        steps among the first 64 of each of the first 128 episodes."""
        if self.state_to_jax is None:
            return {}
        rebuild_state(self.env, state_template(self.env, self.params), 0)  # refuse other wrappers early
        if self.stochastic:
            return self.wanted_for(0, num_episodes, 0)
        wanted, pick, budget = {}, np.random.default_rng([self.seed, 2]), MAX_STATES
        for i in range(num_episodes):
            wanted[i] = {0}
            if i < 128 and budget > 0:
                extra = sorted(set(pick.integers(1, max(min(self.horizon, 64), 2), size=4).tolist()))[:budget]
                budget -= len(extra)
                wanted[i] |= set(extra)
        return wanted

    def from_state_stat(self, recorded) -> Pending:
        per_episode = len(recorded) / max(self.recorded_eps, 1)
        p = from_state_statistic(self.env, self.params, recorded, self.key, self.discrete_obs, self.settings,
                                 self.seed, per_episode)
        p.required = not (self.discrete_obs and self.discrete_act) and not self.model_ok
        return p

    def more_initial(self, n: int):
        """`n` initial observations per side (the episodes' first, then extra resets)."""
        if n not in self.initial_draws:
            reset_fn, size = compiled("reset", port_reset_fn, self.env), 1 << 14  # one compiled shape
            p0 = np.concatenate([flat(reset_fn(self.params, self.key, lo, size), 1) for lo in range(0, n, size)])[:n]
            have = min(n, len(self.ref_side))
            r0 = self.ref_side.obs0[:have]
            if n > have:
                extra = self.ref.initial_observations(self.seed, have, n, self.budget)
                r0 = np.concatenate([r0, extra]) if len(extra) else r0
            self.initial_draws[n] = (p0[: len(r0)], r0)  # as many a side (the budget may cut the reference's)
        return self.initial_draws[n]

    def sample_tier(self) -> list[Pending]:
        out = []
        if not self.initial_exact:
            out += initial_statistics(self.port_side.obs0, self.ref_side.obs0, self.discrete_obs, self.settings,
                                      self.more_initial)
        out += episode_statistics(self.port_side, self.ref_side, self.settings)
        if self.discrete_obs and self.discrete_act:
            out += transition_statistics(self.port_side, self.ref_side, self.settings)
            out.append(local_statistic(self.port_side, self.ref_side, self.settings))
        for s in out:  # what a stronger tier covers only supports the verdict
            if (s.kind == "transition" and self.transitions_exact) or (s.kind == "episode" and self.transitions_certified):
                s.required = False
        return out

    def first_round(self, num_episodes: int, transition_probs) -> list[Pending]:
        """The first `num_episodes` episodes a side and every tier's statistics over them."""
        self.port_chunk = min(PORT_CHUNK, num_episodes)
        self.port_side = self.port_episodes(0, num_episodes, self.port_chunk)
        self.act(0, np.zeros((CHUNK, self.shapes[0])), 0, CHUNK)  # compiled before the reference's cost is measured
        cpu_ref = self.budget.used()
        self.ref_side, self.recorded = self.reference_episodes(0, num_episodes, self.first_wanted(num_episodes), RESAMPLES,
                                                               least=min(num_episodes, FIRST_CHUNK))
        got = len(self.ref_side)
        self.cpu_ref, self.recorded_eps = self.budget.used() - cpu_ref, got
        if got < num_episodes:  # the budget ended first: both sides keep the same episodes
            self.port_side = self.port_side.head(got)
        _check_in_space(self.obs_space, self.unflatten(np.concatenate([self.ref_side.obs0, _last_obs(self.ref_side)])),
                        1 if self.multi else 0, self.obs_to_jax)
        if transition_probs is not None:
            if not (callable(transition_probs) or isinstance(transition_probs, dict)):
                raise TypeError(
                    "verify_port needs transition_probs as {obs: {action: [(prob, next_obs, reward, terminated), ...]}} "
                    f"or a callable (obs, action) -> such a list, got {type(transition_probs).__name__}"
                )
            model = TransitionModel(transition_probs, None, "transition_probs")
        else:
            model = self.ref.transition_model()
        self.model_ok = (model is not None and not self.multi and isinstance(self.obs_space, spaces.Discrete)
                         and isinstance(self.act_space, spaces.Discrete) and self.obs_to_jax is None)
        if transition_probs is not None and not self.model_ok:
            raise ValueError("verify_port: transition_probs needs a single-agent port with Discrete observations and "
                             "actions (and no obs_to_jax)")
        return self._stronger_tiers(model, num_episodes) + self.sample_tier()

    def _stronger_tiers(self, model, num_episodes: int) -> list[Pending]:
        """The exact, from-state and model tiers' statistics (those that apply)."""
        env, params, key, recorded, settings = self.env, self.params, self.key, self.recorded, self.settings
        out: list[Pending] = []
        if recorded and not self.stochastic:
            out.append(step_from_states(env, params, [r for r in recorded if r[0] < num_episodes], key, False, settings))
            starts = {i: core for i, t, core, _, _ in recorded if t == 0}
            out.append(replay_trajectories(env, params, self.horizon, self.ref_side, starts, self.act_template,
                                           rounding=out[-1].rounding))
        if recorded and self.stochastic and not self.model_ok:
            out.append(self.from_state_stat(recorded))
        if self.model_ok:
            if model.initial is not None:
                out.append(model_initial(env, params, key, model, settings))
            # every pair reached is tested on its own: the local guarantee too (the smaller of the two)
            out.append(model_transitions(env, params, self.pol, self.horizon, key, model, int(self.act_space.n),
                                         num_episodes, settings))
            out[-1].goal = min(settings.detect, settings.detect_local)
        self.from_states = self.stochastic and self.state_to_jax is not None and not self.model_ok
        self.transitions_exact = bool((not self.stochastic and recorded) or self.model_ok)
        # what certifies the transitions (exactly, by model, from reference states or pooled over strata)
        self.transitions_certified = self.transitions_exact or self.from_states or (self.discrete_obs and self.discrete_act)
        self.initial_exact = self.model_ok and model.initial is not None
        return out

    def more_episodes(self, episodes: int, new: int, pending: list[Pending]) -> tuple[list[Pending], int]:
        """Run episodes `episodes .. new - 1` on both sides (fewer when the budget ends first) and
        recompute the sampled tiers; returns them and the episodes a side now holds."""
        extra_wanted = self.wanted_for(episodes, new, len(self.recorded)) if self.from_states else {}
        more_ref, more_rec = self.reference_episodes(episodes, new, extra_wanted, 1)
        got = episodes + len(more_ref)
        if got == episodes:
            return pending, episodes
        self.port_side = Side.concat([self.port_side, self.port_episodes(episodes, got - episodes, self.port_chunk)])
        self.ref_side = Side.concat([self.ref_side, more_ref])
        if more_rec:
            self.recorded, self.recorded_eps = self.recorded + more_rec, got
        fresh = self.sample_tier() + ([self.from_state_stat(self.recorded)] if more_rec else [])
        by_name = {p.name: p for p in fresh}
        return [by_name.get(p.name, p) if p.tier in ("sample", "from-state") else p for p in pending], got


def _top_up(pending: list[Pending], level: float, detect: float, kinds=None) -> list[Pending]:
    """Each required statistic short of `detect` that can draw more samples (of `kinds`), topped up."""
    return [p.top_up(level) if (p.top_up and (kinds is None or p.kind in kinds) and p.required
                                and p.short(level, detect)) else p for p in pending]


def _rounds(run: _GymRun, pending, num_episodes, max_episodes, settings: VerifySettings, budget: Budget):
    """Phase 5's sampling: more episodes in rounds while a required statistic falls short of
    `detect`, within `max_episodes` and the budget (CPU seconds, `Budget`). A fixed plan of at
    most `rounds` looks at the data (each round grows the episodes by a quarter at least): each
    statistic is judged at alpha / (m * rounds) (Bonferroni over the statistics and the rounds),
    so however the budget ends -- between rounds or inside one, which then keeps the episodes
    both sides completed -- a faithful port fails with probability at most alpha. Returns
    `(pending, level, rounds, episodes, CPU seconds per episode, why it stopped)`."""
    alpha, detect = settings.alpha, settings.detect
    rounds = 2 + max(0, math.ceil(math.log2(max_episodes / num_episodes)))
    level = alpha / (len(pending) * rounds)
    episodes, used_rounds, stop_reason = len(run.ref_side), 1, budget.stopped
    if stop_reason is None and not any(p.p_value < level for p in pending):  # a failure needs no more samples
        pending = _top_up(pending, level, detect)
    # the next rounds' cost per episode: the reference's (the port's first call compiled; later
    # calls reuse it), with a margin for the port and the statistics; each round re-measures it
    per_episode_s = 1.5 * run.cpu_ref / max(episodes, 1)
    while stop_reason is None:
        short = [p for p in pending if p.required and p.short(level, detect)]
        if any(p.p_value < level for p in pending) or not short:
            break
        needs = [p.needed(level)[0] for p in short]
        if any(n is None for n in needs):
            stop_reason = "a statistic short of detect cannot be helped by more episodes"
            break
        if episodes >= max_episodes or used_rounds >= rounds:
            stop_reason = f"max_episodes={max_episodes:,} reached" if episodes >= max_episodes else f"{rounds} rounds used"
            break
        target = max(int(max(needs) * 1.2), 2 * episodes)  # a margin: the estimate scales the current sample
        new = episodes
        while new < target:
            new *= 2
        affordable = episodes + int(max(budget.left(), 0.0) / max(per_episode_s, 1e-9) * 0.9)
        new = min(new, max_episodes, affordable)
        if new < episodes * 5 // 4:
            stop_reason = f"the budget ({budget.seconds:g} CPU s) ends"
            break
        cpu_round = budget.used()
        pending, got = run.more_episodes(episodes, new, pending)
        if got > episodes:
            per_episode_s = (budget.used() - cpu_round) / (got - episodes)  # the last round's rate (compiled)
        episodes, used_rounds = got, used_rounds + 1
        if got < new:
            stop_reason = budget.stopped or "the budget ended during a round"
            break
        pending = _top_up(pending, level, detect, ("initial",))
        stop_reason = stop_reason or budget.stopped
    return pending, level, rounds, episodes, per_episode_s, stop_reason


def _verdict(run: _GymRun, pending, level, rounds, episodes, per_episode_s, stop_reason, settings: VerifySettings,
             max_episodes, budget: Budget):
    """Phase 5's verdict: fail on any rejection, inconclusive while a required statistic falls short
    of `detect`, pass otherwise; returns `(mismatch, shortfall, the report's fields)` for `conclude`,
    its notes the budget that would certify `detect` and what each tier assumes."""
    alpha, detect = settings.alpha, settings.detect
    statistics = tuple(p.finish(level, detect) for p in pending)
    failed = [s for s in statistics if s.p_value < level]
    short = [s for s in statistics if s.required and s.detectable > s.target(detect)]
    verdict = "fail" if failed else ("inconclusive" if short else "pass")
    needs = [p.needed(level)[0] for p in pending if p.required and p.short(level, detect)]
    episodes_needed = max([n for n in needs if n is not None], default=None) if verdict == "inconclusive" else None
    budget_needed, notes = None, []
    if episodes_needed:
        budget_needed = float(math.ceil(budget.used() + per_episode_s * max(episodes_needed - episodes, 0)))
        notes.append(f"the budget that would certify detect={detect:g}: about {budget_needed:,.0f} CPU s "
                     f"({episodes_needed:,} episodes at {per_episode_s * 1e3:.2f} CPU ms each on this machine)"
                     + (f"; stopped: {stop_reason}" if stop_reason else ""))
    elif stop_reason and budget.stopped:
        notes.append(f"stopped: {stop_reason}")
    notes.append(f"budget: {budget.describe()}; {episodes:,} episodes a side")
    notes += run.ref.notes
    if run.from_states:
        required = any(p.tier == "from-state" and p.required for p in pending)
        notes.append(f"from-state tier: the reference's outcome at each of {len(run.recorded):,} reference states ranked "
                     f"among {FROM_STATE_DRAWS} port draws there" + ("" if required else " (supporting)"))
    if run.discrete_obs and run.discrete_act and not run.transitions_exact:
        notes.append("transitions pooled over (observation, action) strata from each episode's first visit to each: "
                     "episodes are independent, steps within one need not be (the observation need not be the state)")
    for p in pending:
        if p.drift and p.drift["separated"]:
            notes.append(f"{p.name}: {p.port.split('; ', 1)[1]}")
    if run.model_ok:
        notes.append("the model tier steps the port from its own states at each observation: it assumes the "
                     "observation is the whole state, as in the reference's table")
    mismatch = shortfall = None
    if failed:
        s = min(failed, key=lambda s: s.p_value)
        ref_n = "its exact probabilities" if s.tier == "model" and not s.n_reference else f"{s.n_reference:,} samples"
        mismatch = (s.name, f"{s.tier} tier, {s.test}: p-value {s.p_value:.3g} < alpha / (statistics x rounds) = "
                            f"{alpha:g} / ({len(statistics)} x {rounds}); port ({s.n_port:,} samples): {s.port}; "
                            f"reference ({ref_n}): {s.reference}")
    elif short:
        lines = [f"{s.name} ({s.tier}): detects {s.effect} {s.detectable:.3g} > "
                 f"{'detect' if s.goal is None else 'detect_local'}={s.target(detect):g}; {s.needed}" for s in short]
        more = f"; about {episodes_needed:,} episodes would do (max_episodes={max_episodes:,})" if episodes_needed else ""
        shortfall = (f"inconclusive after {episodes} episodes: nothing differs at alpha={alpha:g}, but " + "; ".join(lines)
                     + more + ". Raise max_episodes, pass state_to_jax or transition_probs for an exact tier, or accept a "
                     "larger detect.")
    return mismatch, shortfall, dict(
        statistics=statistics, verdict=verdict, num_episodes=episodes, horizon=run.horizon,
        tiers=tuple(t for t in ("exact", "model", "from-state", "sample") if any(s.tier == t for s in statistics)),
        states_checked=len(run.recorded), budget_needed_s=budget_needed, episodes_needed=episodes_needed,
        notes=tuple(notes))


def verify_port(
    env: Environment,
    reference: Callable[[], Any],
    *,
    state_to_jax: Callable[[Any], Any] | None = None,
    obs_to_jax: Callable[[Any], Any] | None = None,
    action_to_reference: Callable[[np.ndarray], Any] | None = None,
    policy: Callable[[jax.Array, Any], Any] | None = None,
    transition_probs: Any = None,
    num_episodes: int = 1000,
    max_episodes: int = MAX_EPISODES,
    seed: int = 0,
    alpha: float | None = None,
    detect: float | None = None,
    power: float | None = None,
    reference_cache: ReferenceCache | None = None,
    raise_inconclusive: bool = True,
    budget_s: float = BUDGET_S,
    coverage: float | None = None,
    detect_local: float | None = None,
    settings: VerifySettings | None = None,
) -> PortReport:
    """Check that `env` (a jaxenvs port) behaves like `reference`; return the `PortReport` of a
    pass, raise `PortMismatch` on a fail and `PortInconclusive` on an inconclusive run (or,
    with `raise_inconclusive=False`, return its report). Both exceptions carry `.report`.

    `reference` is a zero-argument callable returning a `gymnasium.Env` (or a
    `pettingzoo.ParallelEnv` for a multi-agent port: observations and rewards stacked in
    `possible_agents` order; an episode ends when any agent terminates or is truncated).
    `env` runs without its outermost `AutoReset`; a `TimeLimit` is kept and sets the horizon
    (else `HORIZON` steps).

    Power: the run passes only if every required statistic detects an effect of size `detect`
    (default `DETECT` = 0.02: a total-variation distance for categories, a KS distance for real
    values) with probability `power` (default 0.95), while a faithful port fails with probability
    at most `alpha` (default 1e-3). Where the `num_episodes` episodes fall short it draws more
    in rounds, within `budget_s` and `max_episodes` episodes a side, then reports inconclusive
    with the effect each statistic did certify and the episodes (and about the budget) that would
    certify `detect`. The rounds are a fixed plan of at most
    `2 + ceil(log2(max_episodes / num_episodes))` looks, each statistic judged at
    `alpha / (m * rounds)` at every look (Bonferroni), so stopping early never raises the
    false-alarm rate.

    Budget: `budget_s` (default `BUDGET_S` = 60) is CPU seconds of this process
    (`time.process_time`, every thread; `jaxenvs.testing.runs.Budget`), counted from the call's
    start (building the reference and compiling included), not wall-clock seconds: other
    processes on a busy machine stretch the wall time, not the work, so the same call on the same
    port reaches the same verdict on a quiet and on a busy machine, up to the statistics' noise.
    Drawing stops when it is spent, inside a round too (the reference runs its episodes in chunks;
    the chunk it ends in is dropped, both sides keep the episodes completed, at least
    `min(num_episodes, 16)`); the report's notes give the episodes a side and the CPU and wall
    seconds used. A reference that waits instead of computing is stopped by a guard at
    `WALL_FACTOR` (3) x `budget_s` wall-clock seconds, less those this thread waited for a CPU
    (`jaxenvs.testing.runs.idle_wall_clock`). `reference` is called once: the envs that
    run episodes side by side are `copy.deepcopy`s of the env it returns (one that cannot be
    copied runs its episodes one at a time).

    Transitions of discrete observations and actions are pooled over `(observation, action)`
    strata (each episode's first visit to each): the certified effect is the visitation-weighted
    total variation; rare strata are listed with their share of visits. A second, local guarantee
    holds beside it: every stratum holding at least `coverage` of the visits (default `COVERAGE`
    = 0.01) is tested on its own (Bonferroni over the covered strata), and a pass needs each to
    detect a total variation of `detect_local` (default `DETECT_LOCAL` = 0.1) with probability
    `power`, whatever `detect` is: a port that differs by `detect_local` at a stratum with 1% of
    the visits fails, or is inconclusive on too small a sample, but does not pass. The report's
    `local` names the weakest covered stratum and the bound certified there (exact tiers certify
    every stratum exactly; the model tier tests every pair at `min(detect, detect_local)`).
    With `state_to_jax` and a stochastic port, the from-state tier ranks each reference outcome
    among the port's draws at the same state.

    Float drift: a deterministic port's replayed trajectories may separate from the reference's
    beyond `REPLAY_RTOL` when their divergence stays within `DRIFT_FACTOR` times that of rounding
    twins (`jaxenvs.testing.exact.replay_trajectories`); the report's notes say where they do.

    Exact tiers: `state_to_jax(reference_env)` returns the unwrapped port's state (what
    `env.unwrapped.reset_env` returns) for the reference's current state; a deterministic port
    (traits `chance="deterministic"`) then replays reference states and whole trajectories
    exactly. `transition_probs` gives exact dynamics keyed by the port's integer observations:
    a mapping `{obs: {action: [(prob, next_obs, reward, terminated), ...]}}` (Gymnasium's `P`)
    or a callable `(obs, action) -> such a list`; without it a reference's own
    `env.unwrapped.P` (and `initial_state_distrib`) is used.

    Turn-based games: `reference` may also return a `pettingzoo.AECEnv`, or be a `pyspiel.Game`
    (an OpenSpiel game, explicit chance included), for a sequential `full_action_set` port whose
    only randomness is explicit chance. The reference then plays `num_episodes` games with
    uniformly random legal moves (illegal ones with probability `ILLEGAL_PROB` per ply where it
    defines them: PettingZoo's `TerminateIllegalWrapper`), the port replays each move for move, and
    every ply is compared exactly (`jaxenvs.testing.reference.AECReference`,
    `jaxenvs.testing.reference.OpenSpielReference`): mover, legal-action mask, each agent's
    observation (OpenSpiel: `information_state_tensor`), rewards and end of game; for OpenSpiel
    also chance nodes with their outcome probabilities and the returns. The verdict is pass or
    fail; `state_to_jax`, the conversions, `policy` and `transition_probs` do not apply.

    Conversions: `obs_to_jax` maps a reference observation to the port's, `action_to_reference`
    a port action (numpy) to the reference's (default: Python ints for scalar discrete actions,
    arrays otherwise, a dict over `possible_agents` for a ParallelEnv). `policy(key, obs) ->
    action` acts on both sides (default: `default_policy`). `reference_cache` (a
    `ReferenceCache`) reuses the reference's rollouts between calls; without it the reference
    always runs afresh.

    Settings: `alpha`, `detect`, `power`, `coverage` and `detect_local` (each None: its default
    above) make one `VerifySettings`, checked once; or pass that object whole as `settings` (then
    none of the five: a ValueError says so).
    """
    t_start = time.perf_counter()
    settings = _settings(settings, alpha=alpha, detect=detect, power=power, coverage=coverage,
                         detect_local=detect_local)
    _check_args(env, reference, policy, reference_cache,
                (("num_episodes", num_episodes, 10), ("seed", seed, 0), ("max_episodes", max_episodes, 10)), budget_s)
    port_env, env = env, strip_autoreset(env)
    num_episodes, max_episodes, seed, budget_s = int(num_episodes), int(max_episodes), int(seed), float(budget_s)
    budget = Budget(budget_s)  # from here: building the reference counts, as every later draw does
    probe = reference if (is_openspiel_game(reference) or is_pgx_env(reference)) else reference()
    if is_openspiel_game(probe) or is_aec_env(probe) or is_pgx_env(probe):
        ref = _turn_based_reference(reference, probe, {
            "state_to_jax": state_to_jax, "obs_to_jax": obs_to_jax, "action_to_reference": action_to_reference,
            "policy": policy, "transition_probs": transition_probs})
        return verify_turn_based(port_env, env, env.default_params, ref, num_episodes, seed, settings, reference_cache,
                                 t_start, raise_inconclusive)
    require("scipy.stats", extra="verify", purpose="jaxenvs.testing.verify_port")  # the statistics (not turn-based)
    run = _GymRun(env, reference, probe, seed, policy, (state_to_jax, obs_to_jax, action_to_reference), reference_cache,
                  settings, budget)
    pending = run.first_round(num_episodes, transition_probs)
    pending, level, *rest = _rounds(run, pending, num_episodes, max_episodes, settings, budget)
    mismatch, shortfall, fields = _verdict(run, pending, level, *rest, settings, max_episodes, budget)
    return conclude(run.ref, port_env, env, seed, settings, level, run.space_notes, fields.pop("statistics"), t_start,
                    ("rollouts", run.cache_notes), mismatch, shortfall, raise_inconclusive, budget_s=budget_s,
                    coverage=settings.coverage, detect_local=settings.detect_local, **fields)


def _last_obs(side: Side) -> np.ndarray:
    """Each episode's last observation (its initial one when it took no step)."""
    steps = side.alive.sum(1)
    last = side.obs0.copy()
    idx = np.flatnonzero(steps > 0)
    last[idx] = side.nobs[idx, steps[idx] - 1]
    return last
