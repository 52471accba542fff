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
(`_verify_turn_based`): the reference plays whole games with random legal moves (and illegal ones
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
    CHANCE_TRIES,
    ILLEGAL_PROB,
    games_needed,
    is_aec_env,
    is_openspiel_game,
    verify_turn_based,
)
from jaxenvs.testing.model import model_initial, model_transitions
from jaxenvs.testing.reference import (
    is_pgx_env,
    GymReference,
    ReferenceCache,
    Side,
    TransitionModel,
)
from jaxenvs.testing.report import PortInconclusive, PortMismatch, PortReport, Statistic
from jaxenvs.testing.runs import (
    ALPHA,
    BUDGET_S,
    CONTAINS,
    DEFAULT_POLICIES,
    DETECT,
    FROM_STATE_DRAWS,
    HORIZON,
    MAX_DRAWS,
    MAX_EPISODES,
    MAX_FROM_STATES,
    MAX_STATES,
    PORT_CHUNK,
    POWER,
    RESAMPLES,
    UserPolicy,
    batched_policy_fn,
    compiled,
    default_policy,
    flat,
    is_parallel_env,
    port_reset_fn,
    port_rollout_fn,
    rebuild_state,
    ref_contains,
    same_space,
    time_limit,
    to_python,
)
from jaxenvs.testing.sample import (
    episode_statistics,
    initial_statistics,
    transition_statistics,
)
from jaxenvs.testing.verdict import Pending, conclude
from jaxenvs.wrappers.base import AutoReset, has_wrapper, strip_autoreset

_default_policy = default_policy  # the name tests/test_jax_config.py imports

__all__ = [
    "verify_port",
    "PortMismatch",
    "PortInconclusive",
    "PortReport",
    "Statistic",
    "ReferenceCache",
    "ALPHA",
    "DETECT",
    "POWER",
    "MAX_EPISODES",
    "BUDGET_S",
    "MAX_DRAWS",
    "HORIZON",
    "MAX_STATES",
    "RESAMPLES",
    "ILLEGAL_PROB",
    "CHANCE_TRIES",
    "games_needed",
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


def _check_args(num_episodes, max_episodes, seed, alpha, detect, power):
    for name, v, lo in (("num_episodes", num_episodes, 10), ("seed", seed, 0), ("max_episodes", max_episodes, 10)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < lo:
            raise ValueError(f"verify_port needs {name} as an int >= {lo}, got {v!r}")
    if max_episodes < num_episodes:
        raise ValueError(f"verify_port needs max_episodes >= num_episodes, got {max_episodes} < {num_episodes}")
    for name, v in (("alpha", alpha), ("detect", detect), ("power", power)):
        if not isinstance(v, (float, int)) or isinstance(v, bool) or not 0 < v < 1:
            raise ValueError(f"verify_port needs {name} in (0, 1), got {v!r}")
    if power <= alpha:
        raise ValueError(f"verify_port needs power > alpha, got power={power!r}, alpha={alpha!r}")


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
    alpha: float = ALPHA,
    detect: float = DETECT,
    power: float = POWER,
    reference_cache: ReferenceCache | None = None,
    raise_inconclusive: bool = True,
    budget_s: float = BUDGET_S,
) -> PortReport:
    """Check that `env` (a jaxenvs port) behaves like `reference`; return the `PortReport` of a
    pass, raise `PortMismatch` on a fail and `PortInconclusive` on an inconclusive run (or,
    with `raise_inconclusive=False`, return its report). Both exceptions carry `.report`.

    `reference` is a zero-argument callable returning a fresh `gymnasium.Env` (or a
    `pettingzoo.ParallelEnv` for a multi-agent port: observations and rewards stacked in
    `possible_agents` order; an episode ends when any agent terminates or is truncated).
    `env` runs without its outermost `AutoReset`; a `TimeLimit` is kept and sets the horizon
    (else `HORIZON` steps).

    Power: the run passes only if every required statistic detects an effect of size `detect`
    (default `DETECT` = 0.02: a total-variation distance for categories, a KS distance for real
    values) with probability `power` (default 0.95), while a faithful port fails with probability
    at most `alpha` (default 1e-3). Where the `num_episodes` episodes fall short it draws more
    in rounds, within `budget_s` seconds (default `BUDGET_S` = 60) and `max_episodes` episodes a
    side, then reports inconclusive with the effect each statistic did certify and the episodes
    (and about the budget) that would certify `detect`. The rounds are a fixed plan of at most
    `2 + ceil(log2(max_episodes / num_episodes))` looks, each statistic judged at
    `alpha / (m * rounds)` at every look (Bonferroni), so stopping early never raises the
    false-alarm rate.

    Transitions of discrete observations and actions are pooled over `(observation, action)`
    strata (each episode's first visit to each): the certified effect is the visitation-weighted
    total variation; rare strata are listed with their share of visits. With `state_to_jax` and a
    stochastic port, the from-state tier ranks each reference outcome among the port's draws at
    the same state.

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
    """
    t_start = time.perf_counter()
    _check_args(num_episodes, max_episodes, seed, alpha, detect, power)
    if not isinstance(budget_s, (int, float)) or isinstance(budget_s, bool) or not budget_s > 0 or budget_s != budget_s:
        raise ValueError(f"verify_port needs budget_s as a number of seconds > 0, got {budget_s!r}")
    budget_s = float(budget_s)
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
    port_env = env
    env = strip_autoreset(env)
    if has_wrapper(env, AutoReset):
        raise ValueError("verify_port needs AutoReset outermost (or absent): it checks episodes that end")
    num_episodes, max_episodes, seed = int(num_episodes), int(max_episodes), int(seed)
    alpha, detect, power = float(alpha), float(detect), float(power)
    params = env.default_params
    horizon = time_limit(env) or HORIZON
    multi, num_agents = env.multi_agent, env.num_agents
    lead = 1 if multi else 0  # agent axis of observations and actions
    stochastic = env.unwrapped.traits.chance != "deterministic"

    # ---- 1. spaces ----------------------------------------------------------------------------
    probe = reference if (is_openspiel_game(reference) or is_pgx_env(reference)) else reference()
    if is_openspiel_game(probe) or is_aec_env(probe) or is_pgx_env(probe):
        from jaxenvs.testing.reference import AECReference, OpenSpielReference, PgxReference

        given = {"state_to_jax": state_to_jax, "obs_to_jax": obs_to_jax, "action_to_reference": action_to_reference,
                 "policy": policy, "transition_probs": transition_probs}
        unused = sorted(k for k, v in given.items() if v is not None)
        if unused:
            raise ValueError(f"verify_port: {', '.join(unused)} cannot be used with a turn-based reference (a "
                             "pettingzoo.AECEnv, pyspiel.Game or Pgx env): its games are replayed move for move, actions and "
                             "observations compared as they are")
        if is_openspiel_game(probe):
            ref = OpenSpielReference(probe)
        elif is_pgx_env(probe):
            ref = PgxReference(probe)
        else:
            ref = AECReference(reference, probe)
        return verify_turn_based(port_env, env, params, ref, num_episodes, seed, alpha, detect, power,
                                  reference_cache, t_start, raise_inconclusive)
    require("scipy.stats", extra="verify", purpose="jaxenvs.testing.verify_port")  # the statistics (not turn-based)
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
    obs_space, act_space = env.observation_space(params), env.action_space(params)
    ref_act_space = (probe.action_space(agents[0]) if multi else probe.action_space)
    ref_obs_space = (probe.observation_space(agents[0]) if multi else probe.observation_space)
    space_notes = []
    for which, port_space, ref_space, converted in (
        ("observation space", obs_space, ref_obs_space, obs_to_jax),
        ("action space", act_space, ref_act_space, action_to_reference),
    ):
        if converted is not None:
            space_notes.append(f"{which}: checked through the conversion on every sample")
            continue
        try:
            ref_as_jax = spaces.from_gymnasium(ref_space)
        except (TypeError, ImportError) as e:
            raise PortMismatch(which, f"the reference's {ref_space!r} has no jaxenvs equivalent ({e}); pass a conversion") from e
        if not same_space(port_space, ref_as_jax):
            raise PortMismatch(which, f"port {port_space!r}, reference {ref_space!r}")
        space_notes.append(f"{which}: {port_space!r} == reference {ref_space!r}")

    # ---- 2. the port's run --------------------------------------------------------------------
    key = jax.random.key(seed)
    if policy is None:
        pol = DEFAULT_POLICIES.setdefault((repr(act_space), num_agents, multi), default_policy(act_space, num_agents, multi))
    else:
        pol = UserPolicy(policy)
    rollout = compiled("rollout", port_rollout_fn, env, pol, horizon, False)

    port_chunk = min(PORT_CHUNK, num_episodes)

    def port_episodes(start: int, count: int) -> Side:
        """Episodes `start .. start + count - 1`, `port_chunk` at a time: one compiled shape
        serves every round."""
        parts = []
        for lo in range(0, count, port_chunk):
            m = min(port_chunk, count - lo)
            obs0, (o, a, no, r, te, tr, al) = rollout(params, key, start + lo, port_chunk)
            used = np.flatnonzero(np.asarray(al)[:m].any(axis=0))  # steps past every episode's end are not kept
            t = int(used[-1]) + 1 if len(used) else 1
            cut = lambda x: np.asarray(x)[:m, :t]  # noqa: E731
            parts.append(Side(flat(jax.tree.map(lambda x: np.asarray(x)[:m], obs0), 1), flat(jax.tree.map(cut, o), 2),
                              flat(jax.tree.map(cut, a), 2), flat(jax.tree.map(cut, no), 2),
                              np.asarray(r, np.float64)[:m, :t].reshape(m, t, -1), cut(te), cut(tr), cut(al)))
        return parts[0] if len(parts) == 1 else Side.concat(parts)

    obs0_aval, act_aval = jax.eval_shape(lambda: (lambda o, s: (o, pol(key, key, o)))(*env.reset(key, params)))
    obs_template = jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), obs0_aval)
    act_template = np.zeros(jax.tree.leaves(act_aval)[0].shape, jax.tree.leaves(act_aval)[0].dtype)
    obs_treedef, t_leaves = jax.tree.structure(obs_template), jax.tree.leaves(obs_template)
    discrete_obs = all(x.dtype.kind in "iub" for x in t_leaves)
    discrete_act = isinstance(act_space, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary))
    obs_dim = sum(x.size for x in t_leaves)
    splits = np.cumsum([x.size for x in t_leaves])[:-1]

    # ---- 3. the reference's run ---------------------------------------------------------------
    def convert_obs(o) -> np.ndarray:
        """A reference observation as the port's, flattened to float64[D]."""
        if obs_to_jax is not None:
            o = obs_to_jax(o)
        elif multi:
            o = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *[o[a] for a in agents])
        leaves, treedef = jax.tree.flatten(o)
        if treedef != obs_treedef:
            raise PortMismatch("observation structure", f"port observations are {obs_treedef}, the reference's (converted) {treedef}")
        flat = []
        for x, tl in zip(leaves, t_leaves):
            x = np.asarray(x, tl.dtype)
            if x.shape != tl.shape:
                raise PortMismatch("observation structure", f"port observation leaf of shape {tl.shape}, reference {x.shape}")
            flat.append(x.ravel())
        return np.concatenate(flat).astype(np.float64)

    def unflatten(rows: np.ndarray):
        parts = np.split(rows, splits, axis=1)
        return jax.tree.unflatten(obs_treedef, [p.reshape((len(rows),) + tl.shape).astype(tl.dtype) for p, tl in zip(parts, t_leaves)])

    def convert_action(a):
        if action_to_reference is not None:
            return action_to_reference(a)
        if multi:
            return {ag: to_python(a[i]) for i, ag in enumerate(agents)}
        return to_python(a)

    def check_action(a, a_ref):
        if action_to_reference is not None and not ref_contains(ref_act_space, a_ref, agents):
            raise PortMismatch("action space", f"action_to_reference({a!r}) = {a_ref!r} is not in the reference's {ref_act_space!r}")

    ref = GymReference(reference, probe, multi, convert_obs, convert_action, check_action)
    policy_batch = batched_policy_fn(pol)

    def act(t, rows, start, count):
        return np.asarray(jax.tree.leaves(policy_batch(key, t, unflatten(rows), start, count))[0])

    rng = np.random.default_rng([seed, 1])
    shapes = (obs_dim, act_template.size, num_agents if multi else 1)
    cache_notes = []

    def reference_episodes(start: int, stop: int, wanted: dict, resamples: int):
        cache_key = None
        if reference_cache is not None:
            cache_key = (reference, ref.fingerprint(), state_to_jax, obs_to_jax, action_to_reference, pol, seed, horizon,
                         start, stop, resamples, tuple(sorted((k, tuple(sorted(v))) for k, v in wanted.items())))
            hit = reference_cache.get(cache_key)
            if hit is not None:
                cache_notes.append(f"episodes {start}..{stop - 1}")
                return hit
        out = ref.run(seed, start, stop, horizon, act, shapes, wanted, state_to_jax, resamples, rng)
        if cache_key is not None:
            reference_cache.put(cache_key, out)
        return out

    # which reference steps state_to_jax maps: t = 0 of every episode of the first round
    # (deterministic: each trajectory is replayed), and 4 random steps among the first 64 of
    # each of the first 128 episodes
    wanted: dict[int, set] = {}
    from_states = stochastic and state_to_jax is not None

    def wanted_for(start: int, stop: int, have: int) -> dict:
        """Every step of episodes `start .. stop - 1` (the from-state tier), up to MAX_FROM_STATES."""
        room = MAX_FROM_STATES - have
        if room <= 0:
            return {}
        per = max(1, room // max(stop - start, 1))
        return {i: set(range(min(horizon, per))) for i in range(start, stop)}

    if state_to_jax is not None:
        rebuild_state(env, state_template(env, params), 0)  # refuse other wrappers early
        if from_states:
            wanted = wanted_for(0, num_episodes, 0)
        else:
            pick, budget = np.random.default_rng([seed, 2]), MAX_STATES
            for i in range(num_episodes):
                steps = {0}
                if i < 128 and budget > 0:
                    extra = sorted(set(pick.integers(1, max(min(horizon, 64), 2), size=4).tolist()))[:budget]
                    budget -= len(extra)
                    steps |= set(extra)
                wanted[i] = steps
    resamples = RESAMPLES
    t_round = time.perf_counter()

    port_side = port_episodes(0, num_episodes)
    t_ref = time.perf_counter()
    ref_side, recorded = reference_episodes(0, num_episodes, wanted, resamples)
    t_ref = time.perf_counter() - t_ref
    _check_in_space(obs_space, unflatten(np.concatenate([ref_side.obs0, _last_obs(ref_side)])), lead, obs_to_jax)

    # ---- 4. comparison ------------------------------------------------------------------------
    model = None
    if transition_probs is not None:
        if not (callable(transition_probs) or isinstance(transition_probs, dict)):
            raise TypeError(
                "verify_port needs transition_probs as {obs: {action: [(prob, next_obs, reward, terminated), ...]}} "
                f"or a callable (obs, action) -> such a list, got {type(transition_probs).__name__}"
            )
        model = TransitionModel(transition_probs, None, "transition_probs")
    else:
        model = ref.transition_model()
    model_ok = (model is not None and not multi and isinstance(obs_space, spaces.Discrete)
                and isinstance(act_space, spaces.Discrete) and obs_to_jax is None)
    if transition_probs is not None and not model_ok:
        raise ValueError("verify_port: transition_probs needs a single-agent port with Discrete observations and actions "
                         "(and no obs_to_jax)")
    exact: list[Pending] = []
    recorded_eps = num_episodes

    def from_state_stat(recorded) -> Pending:
        per_episode = len(recorded) / max(recorded_eps, 1)
        p = from_state_statistic(env, params, recorded, key, discrete_obs, power, detect, seed, per_episode)
        p.required = not (discrete_obs and discrete_act) and not model_ok
        return p

    if recorded and not stochastic:
        exact.append(step_from_states(env, params, [r for r in recorded if r[0] < num_episodes], key, stochastic,
                                       power, detect))
        starts = {i: core for i, t, core, _, _ in recorded if t == 0}
        exact.append(replay_trajectories(env, params, horizon, ref_side, starts, act_template))
    modelled: list[Pending] = []
    if model_ok:
        if model.initial is not None:
            modelled.append(model_initial(env, params, key, model, power, detect))
        modelled.append(model_transitions(env, params, pol, horizon, key, model, int(act_space.n), num_episodes, power,
                                           detect))

    transitions_exact = (not stochastic and recorded) or model_ok
    if recorded and stochastic and not model_ok:
        exact.append(from_state_stat(recorded))
    # what certifies the transitions (exactly, by model, from reference states or pooled over strata)
    transitions_certified = transitions_exact or (from_states and not model_ok) or (discrete_obs and discrete_act)
    initial_exact = model_ok and model.initial is not None

    initial_draws: dict = {}

    def more_initial(n: int):
        """`n` initial observations per side (the episodes' first, then extra resets)."""
        if n not in initial_draws:
            reset_fn, size = compiled("reset", port_reset_fn, env), 1 << 14  # one compiled shape
            p0 = np.concatenate([flat(reset_fn(params, key, lo, size), 1) for lo in range(0, n, size)])[:n]
            have = min(n, len(ref_side))
            r0 = ref_side.obs0[:have]
            if n > have:
                r0 = np.concatenate([r0, ref.initial_observations(seed, have, n)])
            initial_draws[n] = (p0, r0)
        return initial_draws[n]

    def sample_tier(port_side: Side, ref_side: Side) -> list[Pending]:
        out = []
        if not initial_exact:
            out += initial_statistics(port_side.obs0, ref_side.obs0, discrete_obs, power, detect, more_initial)
        out += episode_statistics(port_side, ref_side, power, detect)
        if discrete_obs and discrete_act:
            out += transition_statistics(port_side, ref_side, power, detect)
        for s in out:  # what a stronger tier covers only supports the verdict
            if s.kind == "transition" and transitions_exact:
                s.required = False
            if s.kind == "episode" and transitions_certified:
                s.required = False
        return out

    pending = exact + modelled + sample_tier(port_side, ref_side)
    # a fixed plan of at most `rounds` looks at the data (each round grows the episodes by a
    # quarter at least): each statistic is judged at alpha / (m * rounds) (Bonferroni over the
    # statistics and the rounds), so however the budget ends a faithful port fails with
    # probability at most alpha
    rounds = 2 + max(0, math.ceil(math.log2(max_episodes / num_episodes)))
    level = alpha / (len(pending) * rounds)
    episodes, notes, used_rounds = num_episodes, [], 1
    deadline = t_start + budget_s
    if not any(p.p_value < level for p in pending):  # a failure needs no more samples
        pending = [p.top_up(level) if (p.top_up and p.required and p.detectable(level) > detect) else p for p in pending]
    # the next rounds' cost per episode: the reference's (the port's first call compiled; later
    # calls reuse it), with a margin for the port and the statistics; each round re-measures it
    per_episode_s = 1.5 * t_ref / num_episodes
    stop_reason = None
    while True:
        failed = any(p.p_value < level for p in pending)
        short = [p for p in pending if p.required and p.detectable(level) > detect]
        if failed or not short:
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
        affordable = episodes + int(max(deadline - time.perf_counter(), 0.0) / max(per_episode_s, 1e-9) * 0.9)
        new = min(new, max_episodes, affordable)
        if new < episodes * 5 // 4:
            stop_reason = f"the budget ({budget_s:g} s) ends"
            break
        t_round = time.perf_counter()
        port_side = Side.concat([port_side, port_episodes(episodes, new - episodes)])
        extra_wanted = wanted_for(episodes, new, len(recorded)) if from_states and not model_ok else {}
        more_ref, more_rec = reference_episodes(episodes, new, extra_wanted, 1)
        ref_side = Side.concat([ref_side, more_ref])
        if more_rec:
            recorded = recorded + more_rec
            recorded_eps = new
        per_episode_s = (time.perf_counter() - t_round) / (new - episodes)  # the last round's rate (compiled)
        episodes, used_rounds = new, used_rounds + 1
        fresh = sample_tier(port_side, ref_side)
        if more_rec:
            fresh.append(from_state_stat(recorded))
        by_name = {p.name: p for p in fresh}
        pending = [by_name.get(p.name, p) if p.tier in ("sample", "from-state") else p for p in pending]
        pending = [p.top_up(level) if (p.top_up and p.kind == "initial" and p.required and p.detectable(level) > detect)
                   else p for p in pending]

    statistics = tuple(p.finish(level, detect) for p in pending)
    failed = [s for s in statistics if s.p_value < level]
    short = [s for s in statistics if s.required and s.detectable > detect]
    verdict = "fail" if failed else ("inconclusive" if short else "pass")
    needs = [p.needed(level)[0] for p in pending if p.required and p.detectable(level) > detect]
    episodes_needed = max([n for n in needs if n is not None], default=None) if verdict == "inconclusive" else None
    budget_needed = None
    if episodes_needed:
        budget_needed = float(math.ceil((time.perf_counter() - t_start) + per_episode_s * max(episodes_needed - episodes, 0)))
        notes.append(f"the budget that would certify detect={detect:g}: about {budget_needed:,.0f} s "
                     f"({episodes_needed:,} episodes at {per_episode_s * 1e3:.2f} ms each on this machine)"
                     + (f"; stopped: {stop_reason}" if stop_reason else ""))
    if from_states and not model_ok:
        notes.append(f"from-state tier: the reference's outcome at each of {len(recorded):,} reference states ranked "
                     f"among {FROM_STATE_DRAWS} port draws there" + ("" if any(p.tier == "from-state" and p.required
                                                                            for p in pending) else " (supporting)"))
    if discrete_obs and discrete_act and not transitions_exact:
        notes.append("transitions pooled over (observation, action) strata from each episode's first visit to each: "
                     "episodes are independent, steps within one need not be (the observation need not be the state)")
    if model_ok:
        notes.append("the model tier steps the port from its own states at each observation: it assumes the "
                     "observation is the whole state, as in the reference's table")
    mismatch = shortfall = None
    if failed:
        s = min(failed, key=lambda s: s.p_value)
        mismatch = (s.name, f"{s.tier} {s.test} p={s.p_value:.3g} < alpha/(m rounds) = {alpha:g}/({len(statistics)} x "
                            f"{rounds}); port (n={s.n_port}): {s.port}; reference (n={s.n_reference}): {s.reference}")
    elif short:
        lines = [f"{s.name} ({s.tier}): detects {s.effect} {s.detectable:.3g} > detect={detect:g}; {s.needed}" for s in short]
        more = f"; about {episodes_needed:,} episodes would do (max_episodes={max_episodes:,})" if episodes_needed else ""
        shortfall = (f"inconclusive after {episodes} episodes: nothing differs at alpha={alpha:g}, but " + "; ".join(lines)
                     + more + ". Raise max_episodes, pass state_to_jax or transition_probs for an exact tier, or accept a "
                     "larger detect.")
    return conclude(
        ref, port_env, env, seed, alpha, detect, power, level, space_notes, statistics, t_start, ("rollouts", cache_notes),
        mismatch, shortfall, raise_inconclusive, verdict=verdict,
        tiers=tuple(t for t in ("exact", "model", "from-state", "sample") if any(s.tier == t for s in statistics)),
        num_episodes=episodes, horizon=horizon, states_checked=len(recorded), budget_s=budget_s,
        budget_needed_s=budget_needed, episodes_needed=episodes_needed, notes=tuple(notes),
    )


def _last_obs(side: Side) -> np.ndarray:
    """Each episode's last observation (its initial one when it took no step)."""
    steps = side.alive.sum(1)
    last = side.obs0.copy()
    idx = np.flatnonzero(steps > 0)
    last[idx] = side.nobs[idx, steps[idx] - 1]
    return last
