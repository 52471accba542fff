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
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Mapping
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import spaces
from jaxenvs._optional import require
from jaxenvs.checker import _compiler_options  # XLA's cheapest passes: these programs run briefly
from jaxenvs.checker import _jit as _fast_jit
from jaxenvs.core import Environment
from jaxenvs.testing import stats
from jaxenvs.testing.reference import GymReference, ReferenceCache, Side, TransitionModel
from jaxenvs.testing.report import PortInconclusive, PortMismatch, PortReport, Statistic
from jaxenvs.wrappers.base import AutoReset, TimeLimit, TimeLimitState, WithParams, Wrapper, has_wrapper, strip_autoreset

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
]

ALPHA = 1e-3  # probability that a faithful port fails
DETECT = 0.02  # the effect (total variation / KS distance) a pass must be able to detect ...
POWER = 0.95  # ... with this probability
MAX_EPISODES = 1 << 20  # episodes each side may be run for (adaptive sampling, within the budget)
BUDGET_S = 60.0  # seconds a call may spend drawing more episodes (the default call, on a 2-core CPU)
MAX_DRAWS = 1 << 18  # port draws per (observation, action), and initial observations per side
HORIZON = 1000  # steps per episode when the port has no TimeLimit
MAX_STATES = 512  # reference states the port steps from with state_to_jax
RESAMPLES = 1  # reference outcomes per recorded state (its own step; copies are no longer drawn)
FROM_STATE_DRAWS = 128  # port draws per reference state in the from-state tier
MAX_FROM_STATES = 1 << 15  # reference states the from-state tier records at most
STATES_PER_OBS = 2  # port states per observation the model tier steps from: its earliest and latest visit
MAX_CATEGORIES = 32  # a scalar statistic with at most this many distinct values is categorical
RTOL, ATOL = 1e-5, 1e-6  # one step from a reference state: float32 port against a float64 reference
REPLAY_RTOL, REPLAY_ATOL = 1e-4, 1e-5  # whole trajectories: float32 rounding accumulates
STICKINESS = 0.75  # the default policy's largest probability of repeating its episode's action
_DEFAULT_POLICIES: dict = {}  # by action space: one compiled policy serves every port of that space
_CONTAINS: dict = {}  # compiled space.contains by (space, agent axes)


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _time_limit(env) -> int | None:
    while isinstance(env, Wrapper):
        if isinstance(env, TimeLimit):
            return env.max_episode_steps
        env = env.env
    return None


def _rebuild_state(env, core_state, t: int):
    """The state of the (AutoReset-free) wrapper chain `env` around `core_state` after `t` steps."""
    if not isinstance(env, Wrapper):
        return core_state
    inner = _rebuild_state(env.env, core_state, t)
    if isinstance(env, TimeLimit):
        return TimeLimitState(inner, np.int32(t))
    if type(env).inner_state is Wrapper.inner_state:
        return inner  # a wrapper without state of its own
    raise ValueError(
        f"verify_port cannot rebuild the state of wrapper {type(env).__name__} from a reference state; "
        "with state_to_jax only TimeLimit and wrappers without state of their own are supported"
    )


def _flat(tree, batch: int) -> np.ndarray:
    """float64[*batch_shape, D]: the leaves of `tree` flattened after `batch` leading axes."""
    leaves = [np.asarray(x) for x in jax.tree.leaves(tree)]
    shape = leaves[0].shape[:batch]
    return np.concatenate([x.reshape(shape + (-1,)).astype(np.float64) for x in leaves], axis=-1)


def _codes(rows: np.ndarray) -> np.ndarray:
    """One hashable code (a void scalar) per row of a 2-d array."""
    rows = np.ascontiguousarray(rows, np.float64) + 0.0  # -0.0 -> 0.0
    return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1])))[:, 0]


def _quantize(x: np.ndarray) -> np.ndarray:
    """Floats as float32 rounded to 5 significant digits: float32 sums against float64 ones."""
    x = np.asarray(x, np.float32).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mag = np.where(x == 0, 1.0, 10.0 ** np.floor(np.log10(np.abs(np.where(x == 0, 1.0, x)))))
    return np.round(x / mag, 4) * mag


def _fmt_row(row) -> str:
    vals = [f"{v:g}" for v in np.asarray(row).ravel()]
    return vals[0] if len(vals) == 1 else "(" + ", ".join(vals) + ")"


def _summary_categorical(codes: np.ndarray, rows: np.ndarray) -> str:
    if len(codes) == 0:
        return "no samples"
    uniq, idx, counts = np.unique(codes, return_index=True, return_counts=True)
    order = np.argsort(-counts)[:4]
    parts = [f"{_fmt_row(rows[idx[i]])}: {counts[i] / len(codes):.3f}" for i in order]
    more = f", ... ({len(uniq)} values)" if len(uniq) > 4 else ""
    return "{" + ", ".join(parts) + more + "}"


def _summary_real(x: np.ndarray) -> str:
    if len(x) == 0:
        return "no samples"
    q = np.quantile(x, [0.1, 0.5, 0.9])
    return f"mean {np.mean(x):.4g}, sd {np.std(x):.3g}, 10/50/90% {q[0]:.4g}/{q[1]:.4g}/{q[2]:.4g}"


def _is_parallel_env(ref) -> bool:
    try:
        import gymnasium

        if isinstance(ref, gymnasium.Env):
            return False
    except ImportError:
        pass
    return hasattr(ref, "possible_agents")


def _same_space(a: spaces.Space, b: spaces.Space) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, spaces.Discrete):
        return (a.n, a.start) == (b.n, b.start)
    if isinstance(a, spaces.Box):
        return (
            a.shape == b.shape
            and (a.dtype.kind == "f") == (b.dtype.kind == "f")
            and np.array_equal(np.asarray(a.low, np.float64), np.asarray(b.low, np.float64))
            and np.array_equal(np.asarray(a.high, np.float64), np.asarray(b.high, np.float64))
        )
    if isinstance(a, spaces.MultiDiscrete):
        return np.array_equal(a.nvec, b.nvec)
    if isinstance(a, spaces.MultiBinary):
        return a.shape == b.shape
    if isinstance(a, spaces.Dict):
        return a.spaces.keys() == b.spaces.keys() and all(_same_space(a.spaces[k], b.spaces[k]) for k in a.spaces)
    if isinstance(a, spaces.Tuple):
        return len(a.spaces) == len(b.spaces) and all(map(_same_space, a.spaces, b.spaces))
    return repr(a) == repr(b)


def _to_python(a: np.ndarray):
    a = np.asarray(a)
    if a.ndim == 0:
        return int(a) if a.dtype.kind in "iub" else a
    return a


def _ref_contains(space, a_ref, agents) -> bool:
    try:
        if agents and isinstance(a_ref, dict):
            return all(space.contains(a_ref[a]) for a in agents)
        return bool(space.contains(a_ref))
    except Exception:  # noqa: BLE001 -- a malformed action is simply not contained
        return False


# ---------------------------------------------------------------------------------------------
# policies and the port's compiled programs
# ---------------------------------------------------------------------------------------------


def _default_policy(space: spaces.Space, num_agents: int, multi: bool):
    """`(episode_key, step_key, obs) -> action`. Half the episodes act uniformly at random; the
    other half repeat an action drawn once per episode with a probability drawn per episode from
    `[0, STICKINESS)` (else uniform), so that walls, corners and runs in one direction are
    reached too. An observation holding an `"action_mask"` (envs with legal actions) restricts
    both to the legal actions: uniform among them, and the favourite only where it is legal."""

    def one(ek, sk, mask=None):
        k_mode, k_fav, k_p = jax.random.split(ek, 3)
        fav = space.sample(k_fav)
        stick = jnp.where(jax.random.uniform(k_mode, dtype=jnp.float32) < 0.5,
                          jax.random.uniform(k_p, maxval=STICKINESS, dtype=jnp.float32), jnp.float32(0))
        ku, kc = jax.random.split(sk)
        use = jax.random.uniform(kc, dtype=jnp.float32) < stick
        if mask is None:
            uniform = space.sample(ku)
        else:
            uniform = space.sample(ku, mask=mask)
            use = use & (jnp.asarray(mask)[fav - space.start] != 0)
        return jax.tree.map(lambda f, u: jnp.where(use, f, u), fav, uniform)

    def policy(ek, sk, obs):
        masked = isinstance(space, spaces.Discrete) and isinstance(obs, Mapping) and "action_mask" in obs
        mask = obs["action_mask"] if masked else None
        if multi:
            keys = jax.random.split(ek, num_agents), jax.random.split(sk, num_agents)
            return jax.vmap(one)(*keys, *(() if mask is None else (mask,)))
        return one(ek, sk, mask)

    return policy


class _UserPolicy:
    """A user's `(key, obs) -> action` as `(episode_key, step_key, obs) -> action` (hashable by
    the user's function, so the compiled rollout is reused)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, ek, sk, obs):
        return self.fn(sk, obs)

    def __hash__(self):
        return hash(self.fn)

    def __eq__(self, other):
        return isinstance(other, _UserPolicy) and other.fn is self.fn


def _episode_keys(seed_key, index):
    """The keys of episode `index` (traced): reset, step, the policy's per-episode and per-step
    keys. One derivation inside the compiled functions serves both sides."""
    k_reset, k_step, k_ep, k_policy = jax.random.split(seed_key, 4)
    fold = lambda k: jax.random.fold_in(k, index)  # noqa: E731
    return fold(k_reset), fold(k_step), fold(k_ep), fold(k_policy)


def _env_key(env):
    """A key under which ports compute alike given the same params: the wrapper chain without
    `WithParams`, the base class and its constructor's attributes; the env itself when some
    wrapper or attribute is not understood."""
    parts, inner = [], env
    while isinstance(inner, Wrapper):
        if isinstance(inner, TimeLimit):
            parts.append(("TimeLimit", inner.max_episode_steps))
        elif not isinstance(inner, WithParams):
            return env
        inner = inner.env
    attrs = []
    for k, v in sorted(vars(inner).items()):
        if isinstance(v, np.ndarray):
            v = (v.shape, v.dtype.str, v.tobytes())
        try:
            hash(v)
        except TypeError:
            return env
        attrs.append((k, v))
    return (tuple(parts), type(inner), tuple(attrs))


_COMPILED: dict = {}  # (what, env key, ...) -> compiled function; the first env of a key serves


def _compiled(what, build, env, *args):
    key = (what, _env_key(env)) + args
    fn = _COMPILED.get(key)
    if fn is None:
        if len(_COMPILED) >= 64:
            _COMPILED.pop(next(iter(_COMPILED)))
        fn = _COMPILED[key] = build(env, *args)
    return fn


def _fast_jit_static(fn, *static):
    return jax.jit(fn, static_argnums=static, compiler_options=_compiler_options(jax.default_backend()))


def _port_rollout_fn(env, policy, horizon: int, with_states: bool):
    """Jitted `run(params, seed_key, start, num)`: episodes `start .. start + num - 1` (vmapped)
    of at most `horizon` steps; a while loop that stops once every episode has ended, writing
    each step (and, `with_states`, the state it started from) into `[horizon]` buffers."""

    def episode(params, seed_key, index):
        reset_key, step_key, ep_key, policy_key = _episode_keys(seed_key, index)
        obs0, state0 = env.reset(reset_key, params)

        def transition(t, obs, state):
            action = policy(ep_key, jax.random.fold_in(policy_key, t), obs)
            out = env.step(jax.random.fold_in(step_key, t), state, action, params)
            return action, out

        action_aval, out_aval = jax.eval_shape(transition, 0, obs0, state0)
        zeros = lambda x: jnp.zeros((horizon,) + x.shape, x.dtype)  # noqa: E731
        record = (obs0, action_aval, out_aval[0], out_aval[2], out_aval[3], out_aval[4])
        if with_states:
            record = record + (state0,)
        buffers = jax.tree.map(zeros, record)

        def cond(carry):
            t, _, _, done, _ = carry
            return (t < horizon) & ~done

        def body(carry):
            t, obs, state, _, buffers = carry
            action, (nobs, nstate, reward, term, trunc, _) = transition(t, obs, state)
            row = (obs, action, nobs, reward, term, trunc) + ((state,) if with_states else ())
            buffers = jax.tree.map(lambda b, x: b.at[t].set(x), buffers, row)
            return t + 1, nobs, nstate, term | trunc, buffers

        init = (jnp.int32(0), obs0, state0, jnp.zeros((), bool), buffers)
        t, _, _, _, buffers = jax.lax.while_loop(cond, body, init)
        alive = jnp.arange(horizon) < t
        return obs0, buffers + (alive,)

    def run(params, seed_key, start, num: int):
        return jax.vmap(episode, in_axes=(None, None, 0))(params, seed_key, start + jnp.arange(num))

    return _fast_jit_static(run, 3)


def _port_reset_fn(env):
    """Jitted: the initial observations of episodes `start .. start + num - 1`."""

    def run(params, seed_key, start, num: int):
        def one(index):
            return env.reset(_episode_keys(seed_key, index)[0], params)[0]

        return jax.vmap(one)(start + jnp.arange(num))

    return _fast_jit_static(run, 3)


@functools.lru_cache(maxsize=32)
def _batched_policy_fn(policy):
    def act(seed_key, t, obs, start, num: int):
        def one(index, o):
            _, _, ep_key, policy_key = _episode_keys(seed_key, index)
            return policy(ep_key, jax.random.fold_in(policy_key, t), o)

        return jax.vmap(one)(start + jnp.arange(num), obs)

    return _fast_jit_static(act, 4)


def _state_step_fn(env, samples: int):
    """Jitted: each of a batch of states stepped `samples` times with its action."""

    def one(params, state, action, key):
        keys = jax.random.split(key, samples)
        nobs, _, reward, term, trunc, _ = jax.vmap(lambda k: env.step(k, state, action, params))(keys)
        return nobs, reward, term, trunc

    def run(params, states, actions, keys):
        return jax.vmap(one, in_axes=(None, 0, 0, 0))(params, states, actions, keys)

    return _fast_jit(run)


def _replay_fn(env, horizon: int):
    """Jitted: from a batch of states, `horizon` steps with given actions (a scan; the key does
    not matter for a deterministic port)."""

    def one(params, state, actions, key):
        def body(state, xs):
            t, action = xs
            nobs, nstate, reward, term, trunc, _ = env.step(jax.random.fold_in(key, t), state, action, params)
            return nstate, (nobs, reward, term, trunc)

        return jax.lax.scan(body, state, (jnp.arange(horizon), actions))[1]

    def run(params, states, actions, key):
        return jax.vmap(one, in_axes=(None, 0, 0, None))(params, states, actions, key)

    return _fast_jit(run)


# ---------------------------------------------------------------------------------------------
# statistics before their level is known
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Pending:
    """A computed comparison whose detectable effect depends on the level it will be judged at:
    `detectable(level) -> effect` and `needed(level) -> (episodes or None, text)`; `top_up(level)`
    (optional) draws more samples and returns the improved comparison."""

    name: str
    tier: str
    test: str
    p_value: float
    effect: str
    n_port: int
    n_reference: int
    required: bool
    port: str
    reference: str
    detectable: Callable[[float], float]
    needed: Callable[[float], tuple[int | None, str]] = lambda level: (None, "")
    top_up: Callable[[float], "_Pending"] | None = None
    kind: str = "episode"  # which behaviour it covers: "initial", "transition", "episode"

    def finish(self, level: float, detect: float) -> Statistic:
        d = float(self.detectable(level))
        needed = self.needed(level)[1] if d > detect else ""
        return Statistic(
            self.name, self.tier, self.test, float(self.p_value), d, self.effect, int(self.n_port),
            int(self.n_reference), self.required, self.port, self.reference, needed,
        )


def _exact(name, ok: bool, n_port, n_ref, port="", reference="", kind="transition") -> _Pending:
    return _Pending(name, "exact", "replay", 1.0 if ok else 0.0, "exact", n_port, n_ref, True, port, reference,
                    detectable=lambda level: 0.0, kind=kind)


def _episodes_for(per_side: float, have: int, samples_per_episode: float = 1.0) -> int:
    return int(math.ceil(per_side / max(samples_per_episode, 1e-12))) if have else 0


def _compare(name: str, x: np.ndarray, y: np.ndarray, power: float, detect: float, *, categorical: bool | None = None,
             per_episode: float = 1.0, kind: str = "episode") -> _Pending:
    """Two-sample comparison of rows `x` [n, D] and `y` [m, D]: categorical when `categorical`
    or (`None`) when at most MAX_CATEGORIES distinct rows occur; else KS (D must be 1).
    `per_episode`: samples each episode contributes (for the episodes needed)."""
    x, y = _quantize(np.reshape(x, (len(x), -1))), _quantize(np.reshape(y, (len(y), -1)))
    cx, cy = _codes(x), _codes(y)
    n, m = len(x), len(y)
    if categorical is None:
        categorical = len(np.unique(np.concatenate([cx, cy]))) <= MAX_CATEGORIES
    if categorical:
        p = stats.categorical_test(cx, cy)
        df = max(len(np.unique(np.concatenate([cx, cy]))) - 1, 1)

        def needed(level):
            per_side = 2 * stats.needed_tv(detect, df, level, power)
            return _episodes_for(per_side, n, per_episode), f"needs about {int(per_side):,} samples per side"

        return _Pending(name, "sample", "chi-square/fisher", p, "tv", n, m, True,
                        _summary_categorical(cx, x), _summary_categorical(cy, y),
                        detectable=lambda level: stats.detectable_tv(n * m / max(n + m, 1), df, level, power),
                        needed=needed, kind=kind)
    _, p = stats.ks_test(x[:, 0], y[:, 0])

    def needed_ks(level):
        per_side = stats.needed_ks(detect, level, power)
        return _episodes_for(per_side, n, per_episode), f"needs about {per_side:,} samples per side"

    return _Pending(name, "sample", "ks", p, "ks", n, m, True, _summary_real(x[:, 0]), _summary_real(y[:, 0]),
                    detectable=lambda level: stats.detectable_ks(n, m, level, power), needed=needed_ks, kind=kind)


# ---------------------------------------------------------------------------------------------
# phase 4a: the exact tier
# ---------------------------------------------------------------------------------------------


def _state_template(env, params):
    """Shapes and dtypes of the unwrapped port's state (nothing is computed)."""
    return jax.eval_shape(env.unwrapped.reset, jax.random.key(0), params)[1]


def _port_states(env, params, cores_and_times):
    """A batch of the port's (wrapped) states from `(state_to_jax result, t)` pairs."""
    t_leaves, t_def = jax.tree.flatten(_state_template(env, params))
    states = []
    for core, t in cores_and_times:
        leaves, treedef = jax.tree.flatten(core)
        if treedef != t_def:
            raise ValueError(f"state_to_jax returned {treedef}; the unwrapped port's state (env.unwrapped.reset_env) is {t_def}")
        core = jax.tree.unflatten(t_def, [np.asarray(x, tl.dtype) for x, tl in zip(leaves, t_leaves)])
        states.append(_rebuild_state(env, core, t))
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *states)


def _step_from_states(env, params, recorded, key, stochastic, power, detect) -> _Pending:
    """The port stepped from the reference states in `recorded`: exactly compared (deterministic
    port) or as distributions per state (stochastic; supporting)."""
    resamples = len(recorded[0][4])
    state_batch = _port_states(env, params, [(core, t) for _, t, core, _, _ in recorded])
    actions = np.stack([np.asarray(r[3]) for r in recorded])
    keys = jax.random.split(jax.random.fold_in(key, 1 << 30), len(recorded))
    nobs, reward, term, trunc = _compiled("state step", _state_step_fn, env, resamples)(params, state_batch, actions, keys)
    p_obs = _flat(nobs, 2)  # [S, R, D]
    p_rew = np.asarray(reward, np.float64).reshape(len(recorded), resamples, -1)
    p_term, p_trunc = np.asarray(term), np.asarray(trunc)
    name = "step from reference states (obs, reward, flags)"
    if not stochastic:
        for s, (i, t, _, a, outs) in enumerate(recorded):
            r_obs, r_rew, r_term, r_trunc = outs[0]
            where = f"after reference episode {i} step {t}, action {np.asarray(a).tolist()}"
            for what, pv, rv, exact in (
                ("terminated", p_term[s, 0], r_term, True),
                ("truncated", p_trunc[s, 0], r_trunc, True),
                ("observation", p_obs[s, 0], r_obs, False),
                ("reward", p_rew[s, 0], r_rew, False),
            ):
                same = np.array_equal(pv, rv) if exact else np.allclose(pv, rv, rtol=RTOL, atol=ATOL)
                if not same:
                    return _exact(name, False, len(recorded), len(recorded),
                                  f"{what} {np.asarray(pv).tolist()} {where}",
                                  f"{np.asarray(rv).tolist()} (floats compared with rtol={RTOL:g}, atol={ATOL:g})")
        return _exact(name, True, len(recorded), len(recorded), f"{len(recorded)} states", "the same outcome at each")
    return _exact(name, True, len(recorded), len(recorded), f"{len(recorded)} states", "the same outcome at each")


def _ranks(port_rows: np.ndarray, ref_rows: np.ndarray, rng, tol: bool = False) -> np.ndarray:
    """Randomised ranks in (0, 1) of each reference outcome `ref_rows[s]` among the port's draws
    `port_rows[s, :]` at the same state (ties broken at random): exactly uniform when the
    reference's outcome and the port's draws are exchangeable, whatever the outcomes' type.
    With `tol`, real values within `RTOL`/`ATOL` of each other count as ties (a float32 port
    against a float64 reference)."""
    ref = ref_rows[:, None]
    width = RTOL * np.abs(ref) + ATOL if tol else 0.0
    less = (port_rows < ref - width).sum(1)
    eq = (np.abs(port_rows - ref) <= width).sum(1)
    k = port_rows.shape[1]
    return (less + rng.uniform(size=len(less)) * (eq + 1)) / (k + 1)


def _from_state(env, params, recorded, key, discrete: bool, power, detect, seed: int, per_episode: float) -> _Pending:
    """The from-state tier of a stochastic port: at each reference state in `recorded` the port
    steps `FROM_STATE_DRAWS` times (vmapped) with the reference's action, and the reference's
    own outcome there is ranked among the port's draws (`_ranks`); the ranks of all states are
    tested for uniformity (`stats.rank_test`), per component -- the whole outcome row in a fixed
    order for discrete observations; each observation entry, the reward and the flags for real
    ones -- Bonferroni over the components. The certified effect is a Kolmogorov-Smirnov
    distance of the ranks from uniform."""
    draws = FROM_STATE_DRAWS
    fn = _compiled("state step", _state_step_fn, env, draws)
    p_rows, r_rows = [], []
    chunk = 1024
    for lo in range(0, len(recorded), chunk):
        part = recorded[lo : lo + chunk]
        m = len(part)
        size = 1 << max(0, int(math.ceil(math.log2(m))))  # padded to a power of two: few compiles
        idx = np.minimum(np.arange(size), m - 1)
        state_batch = _port_states(env, params, [(part[i][2], part[i][1]) for i in idx])
        actions = np.stack([np.asarray(part[i][3]) for i in idx])
        keys = jax.random.split(jax.random.fold_in(key, (3 << 28) + lo), size)
        nobs, reward, term, trunc = fn(params, state_batch, actions, keys)
        obs = _flat(nobs, 2)[:m]
        rew = np.asarray(reward, np.float64).reshape(size, draws, -1)[:m]
        flags = (np.asarray(term).astype(np.float64) * 2 + np.asarray(trunc))[:m, :, None]
        p_rows.append(np.concatenate([obs, rew, flags], axis=2))
        for e, t, core, a, outs in part:
            o = outs[-1]
            r_rows.append(np.concatenate([o[0], o[1], [2.0 * o[2] + o[3]]]))
    p_rows = np.concatenate(p_rows)
    r_rows = np.stack(r_rows)
    if discrete:
        p_rows, r_rows = _quantize(p_rows), _quantize(r_rows)
    S, K, C = p_rows.shape
    rng = np.random.default_rng([seed, 5])
    if discrete:  # one component: the whole row, in the order of its distinct values
        codes = _codes(np.concatenate([p_rows.reshape(S * K, C), r_rows]))
        _, labels = np.unique(codes, return_inverse=True)
        labels = labels.ravel().astype(np.float64)
        comps = [("outcome", labels[: S * K].reshape(S, K), labels[S * K :])]
    else:
        names = [f"obs[{j}]" for j in range(C - 2)] + ["reward", "flags"]
        comps = [(names[j], p_rows[:, :, j], r_rows[:, j]) for j in range(C)]
    results = []
    for cname, pc, rc in comps:
        if np.all(pc == pc[:, :1]) and np.allclose(rc, pc[:, 0], rtol=RTOL, atol=ATOL):
            continue  # the same constant outcome on both sides at every state: nothing to rank
        stat, p = stats.rank_test(_ranks(pc, rc, rng, tol=not discrete))
        results.append((p, stat, cname))
    n_comp = max(len(results), 1)
    p_all = min(1.0, n_comp * min((r[0] for r in results), default=1.0))
    worst = min(results, default=(1.0, 0.0, "-"))
    name = "from reference states (rank of the reference's outcome)"

    def needed(level):
        n = stats.needed_rank(detect, level / n_comp, power)
        return int(math.ceil(n / max(per_episode, 1e-9))), f"needs about {n:,} reference states"

    return _Pending(
        name, "from-state", "rank KS per component", p_all, "rank ks", S * K, S, True,
        f"{S} states x {K} draws; least uniform: {worst[2]} (KS {worst[1]:.4f})",
        f"the reference's outcome at each ({n_comp} components ranked)",
        detectable=lambda level: stats.detectable_rank(S, level / n_comp, power), needed=needed, kind="transition",
    )


def _replay_trajectories(env, params, horizon, ref: Side, starts: dict, act_template) -> _Pending:
    """Every reference episode with a recorded initial state, replayed by the port with the
    reference's actions; every step's observation, reward and flags must agree."""
    episodes = sorted(starts)
    states = _port_states(env, params, [(starts[i], 0) for i in episodes])
    shape, dtype = act_template.shape, act_template.dtype
    actions = ref.act[episodes].reshape((len(episodes), horizon) + shape).astype(dtype)
    nobs, reward, term, trunc = _compiled("replay", _replay_fn, env, horizon)(params, states, actions, jax.random.key(0))
    p_obs, p_rew = _flat(nobs, 2), np.asarray(reward, np.float64).reshape(len(episodes), horizon, -1)
    p_term, p_trunc = np.asarray(term), np.asarray(trunc)
    alive = ref.alive[episodes]
    name = "trajectory replay (every step)"
    checks = (
        ("terminated", p_term, ref.term[episodes], None),
        ("truncated", p_trunc, ref.trunc[episodes], None),
        ("observation", p_obs, ref.nobs[episodes], (REPLAY_RTOL, REPLAY_ATOL)),
        ("reward", p_rew, ref.rew[episodes], (REPLAY_RTOL, REPLAY_ATOL)),
    )
    first_bad = None
    for what, pv, rv, tol in checks:
        if tol is None:
            bad = (pv != rv) & alive
        else:
            close = np.isclose(pv, rv, rtol=tol[0], atol=tol[1]).reshape(pv.shape[:2] + (-1,)).all(-1)
            bad = ~close & alive
        if bad.any():
            e, t = np.argwhere(bad)[np.argmin(np.argwhere(bad)[:, 1])]
            if first_bad is None or t < first_bad[2]:
                first_bad = (what, e, t, pv[e, t], rv[e, t])
    steps = int(alive.sum())
    if first_bad is not None:
        what, e, t, pv, rv = first_bad
        a = ref.act[episodes[e], : t + 1].reshape((t + 1,) + shape).tolist()
        return _exact(name, False, steps, steps,
                      f"{what} {np.asarray(pv).tolist()} at step {t} of reference episode {episodes[e]} (actions {a})",
                      f"{np.asarray(rv).tolist()} (floats within rtol={REPLAY_RTOL:g}, atol={REPLAY_ATOL:g})")
    return _exact(name, True, steps, steps, f"{len(episodes)} episodes, {steps} steps", "the same at every step")


# ---------------------------------------------------------------------------------------------
# phase 4b: the model tier
# ---------------------------------------------------------------------------------------------


def _outcome_table(model: TransitionModel, obs: int, action: int):
    """`(keys, probs)`: the model's distinct outcomes `(next obs, reward, terminated)` (rewards
    quantized as the port's) and their probabilities, or None when the model lacks the pair."""
    outs = model.outcomes(obs, action)
    if outs is None:
        return None
    merged: dict = {}
    for p, s, r, t in outs:
        k = (float(s), float(_quantize(np.array([r]))[0]), float(t))
        merged[k] = merged.get(k, 0.0) + p
    keys = list(merged)
    return keys, np.array([merged[k] for k in keys])


def _model_initial(env, params, key, model: TransitionModel, power, detect) -> _Pending:
    probs = np.asarray(model.initial, np.float64)
    df = max(int(np.count_nonzero(probs)) - 1, 1)
    name = "initial observation"

    def run(draws: int) -> _Pending:
        obs = np.asarray(_compiled("reset", _port_reset_fn, env)(params, key, 0, draws)).ravel().astype(np.int64)
        inside = (obs >= 0) & (obs < len(probs))
        counts = np.bincount(obs[inside], minlength=len(probs)).astype(np.float64)
        extra = int((~inside).sum())
        p = stats.goodness_of_fit(np.append(counts, extra), np.append(probs, 0.0))
        freq = counts / max(draws, 1)
        tv = 0.5 * (np.abs(freq - probs).sum() + extra / max(draws, 1))
        top = np.argsort(-counts)[:4]
        port = "{" + ", ".join(f"{o}: {freq[o]:.4f}" for o in top if counts[o]) + "}" + f", TV {tv:.4f}"
        ref = "{" + ", ".join(f"{o}: {probs[o]:.4f}" for o in np.argsort(-probs)[:4] if probs[o]) + "} (exact)"
        return _Pending(
            name, "model", "goodness of fit", p, "tv", draws, 0, True, port, ref,
            detectable=lambda level: stats.detectable_model(draws, df, level, power),
            needed=lambda level: (None, f"needs {stats.needed_model(detect, df, level, power):,} port resets"),
            top_up=lambda level: run(min(MAX_DRAWS, stats.needed_model(detect, df, level, power))), kind="initial",
        )

    return run(256)


def _model_transitions(env, params, pol, horizon, key, model: TransitionModel, num_actions, episodes, power,
                       detect) -> _Pending:
    """The port, stepped from its own states at every observation it reached in its `episodes`
    episodes (the state of the earliest visit and, from another episode, of the latest) with
    every action, against the model's exact probabilities."""
    run = _compiled("rollout", _port_rollout_fn, env, pol, horizon, True)
    _, (obs, _, _, _, _, _, states, alive) = run(params, key, 0, episodes)
    obs = np.asarray(obs).reshape(episodes, horizon)
    alive = np.asarray(alive)
    chosen: dict[int, list] = {}
    e_idx, t_idx = np.nonzero(alive)
    order = np.lexsort((e_idx, t_idx))  # by step, then episode
    for o, rows in stats._group(obs[e_idx, t_idx][order].astype(np.int64)).items():
        visits = [(int(e_idx[order][r]), int(t_idx[order][r])) for r in rows]
        first, last = visits[0], visits[-1]  # the earliest and the latest step that reached o
        chosen[int(o)] = [first] + ([last] if last[0] != first[0] and STATES_PER_OBS > 1 else [])
    pairs, tables, missing = [], {}, []
    for o in sorted(chosen):
        for a in range(num_actions):
            tab = _outcome_table(model, o, a)
            if tab is None:
                missing.append((o, a))
                continue
            tables[(o, a)] = tab
            pairs += [(e, t, o, a) for e, t in chosen[o]]
    name = "transition | (observation, action)"
    if missing:
        o, a = missing[0]
        return _Pending(name, "model", "goodness of fit", 0.0, "tv", len(pairs), 0, True,
                        f"reached observation {o} (action {a})", f"{model.source} has no entry for it",
                        detectable=lambda level: 0.0, kind="transition")
    num_pairs = len(tables)
    df = max(max(int(np.count_nonzero(p)) - 1 for _, p in tables.values()), 1)
    state_idx = np.array([[e, t] for e, t, _, _ in pairs])
    state_batch = jax.tree.map(lambda x: np.asarray(x)[state_idx[:, 0], state_idx[:, 1]], states)
    action_batch = np.array([a for _, _, _, a in pairs], np.int32)
    min_states = min(len(chosen[o]) for o, _ in tables)
    rows_of = {k: [j for j, (_, _, o, a) in enumerate(pairs) if (o, a) == k] for k in tables}

    def sample(draws: int) -> _Pending:
        """`draws` per (observation, action), split over its states."""
        per = 1 << max(0, int(math.ceil(math.log2(draws / min_states))))  # a power of 2: few compiles
        fn = _compiled("state step", _state_step_fn, env, per)
        outs, chunk = [], min(256, 1 << int(math.ceil(math.log2(len(pairs)))))
        for lo in range(0, len(pairs), chunk):
            idx = np.minimum(np.arange(lo, lo + chunk), len(pairs) - 1)  # the last chunk padded: one shape
            keys = jax.random.split(jax.random.fold_in(key, (2 << 28) + lo), chunk)
            sub = jax.tree.map(lambda x: x[idx], state_batch)
            nobs, reward, term, _ = fn(params, sub, action_batch[idx], keys)
            m = min(chunk, len(pairs) - lo)
            outs.append((np.asarray(nobs).reshape(chunk, per)[:m], np.asarray(reward, np.float64).reshape(chunk, per)[:m],
                         np.asarray(term).reshape(chunk, per)[:m]))
        nobs = np.concatenate([o[0] for o in outs])
        reward = _quantize(np.concatenate([o[1] for o in outs]))
        term = np.concatenate([o[2] for o in outs])
        ps, found, n_min = [], [], None
        for (o, a), (keys, probs) in tables.items():
            rows = rows_of[(o, a)]
            got = np.stack([nobs[rows].ravel(), reward[rows].ravel(), term[rows].ravel().astype(np.float64)], 1)
            match = np.all(got[:, None, :] == np.array(keys, np.float64)[None], axis=-1)  # [draws, outcomes]
            ids = np.where(match.any(1), match.argmax(1), len(keys))
            counts = np.bincount(ids, minlength=len(keys) + 1).astype(np.float64)
            p = stats.goodness_of_fit(counts, np.append(probs, 0.0))
            n = counts.sum()
            n_min = n if n_min is None else min(n_min, n)
            tv = 0.5 * np.abs(counts / n - np.append(probs, 0.0)).sum()
            ps.append(p)
            extra = [tuple(r) for r in np.unique(got[ids == len(keys)], axis=0)[:3]]
            found.append((p, -tv, (o, a), counts / n, keys, probs, extra))
        p_all = min(1.0, num_pairs * min(ps))
        _, neg_tv, (o, a), freq, keys, probs, extra = min(found, key=lambda f: (f[0], f[1]))
        fmt = lambda k: f"(next {k[0]:g}, reward {k[1]:g}, term {bool(k[2])})"  # noqa: E731
        port = f"at observation {o}, action {a}: " + ", ".join(f"{fmt(k)} {f:.4f}" for k, f in zip(keys, freq[:-1]))
        if extra:
            port += f", outcomes of probability 0: {', '.join(fmt(k) for k in extra[:3])} ({freq[-1]:.4f})"
        port += f"; TV {-neg_tv:.4f} (the least likely of {num_pairs} pairs)"
        ref = ", ".join(f"{fmt(k)} {p:.4f}" for k, p in zip(keys, probs)) + f" ({model.source})"
        draws_done = int(n_min)
        return _Pending(
            name, "model", "goodness of fit per (observation, action)", p_all, "tv", int(len(nobs) * per), 0, True,
            port, ref,
            detectable=lambda level: stats.detectable_model(draws_done, df, level / num_pairs, power),
            needed=lambda level: (None, f"needs {stats.needed_model(detect, df, level / num_pairs, power):,} draws per pair"),
            top_up=lambda level: sample(min(MAX_DRAWS, stats.needed_model(detect, df, level / num_pairs, power))),
            kind="transition",
        )

    return sample(256)


# ---------------------------------------------------------------------------------------------
# phase 4c: the sample tier
# ---------------------------------------------------------------------------------------------


def _first_visits(side: Side):
    """Per stratum (observation, action), the first visit of every episode: the rows of the alive
    steps as (stratum codes, next-obs+terminated rows, reward rows)."""
    n, t = np.nonzero(side.alive)
    obs, act = side.obs[n, t], side.act[n, t]
    key = np.concatenate([n[:, None].astype(np.float64), obs, act], axis=1)
    _, first = np.unique(_codes(key), return_index=True)
    first = np.sort(first)
    strata = _codes(np.concatenate([obs, act], axis=1)[first])
    nxt = np.concatenate([side.nobs[n, t], side.term[n, t, None]], axis=1)[first]
    rew = _quantize(side.rew[n, t][first])
    return strata, nxt, rew


def _transition_statistics(port: Side, ref: Side, power, detect) -> list[_Pending]:
    """Next observation (with terminated) and reward per (observation, action), first visits,
    pooled over the strata (`stats.pooled_stratified_test`).

    The certified effect is the visitation-weighted total variation `sum_s w_s TV_s`, `w_s` the
    stratum's share of the reference's first visits: what the policy's episodes see of the
    transitions. Strata too rare to pool are listed with their share of visits, which is added to
    the certified effect (a difference there cannot be ruled out); they do not block a pass on their
    own. A large difference in any one stratum still fails it (the pooled test's local half)."""
    ps, pn, pr = _first_visits(port)
    rs, rn, rr = _first_visits(ref)
    episodes = len(ref)
    out = []
    for name, px, rx in (
        ("next observation, terminated | (observation, action)", pn, rn),
        ("reward | (observation, action)", pr, rr),
    ):
        cx, cy = _codes(px), _codes(rx)
        tables = stats.stratified_tables(ps, cx, rs, cy)
        total = max(len(rs), 1)
        weights = {s: float(t[1].sum()) / total for s, t in tables.items()}
        # reference visits in strata the port never reached: outside the pooled strata too
        missing = 1.0 - sum(weights.values())
        res = stats.pooled_stratified_test(tables, weights)
        inv_info, df, rare_share = res["inv_info"], res["df"], res["rare_share"] + max(missing, 0.0)

        def detectable(level, inv_info=inv_info, df=df, rare_share=rare_share):
            if df <= 0:  # one outcome per stratum on both sides: the pooled sum has nothing to vary
                return rare_share if inv_info > 0 else 1.0
            return stats.detectable_weighted_tv(inv_info, df, rare_share, level, power)

        def needed(level, inv_info=inv_info, df=df, rare_share=rare_share):
            if rare_share >= detect or df <= 0:
                return None, f"strata outside the pool hold {rare_share:.3f} of the visits (>= detect)"
            lam = stats._noncentrality(max(df, 1), level / 2, power)
            # inv_info falls as 1 / episodes: the episodes at which sqrt(lam inv_info / 4) + rare = detect
            target = (detect - rare_share) ** 2 * 4 / lam
            n = int(math.ceil(episodes * inv_info / max(target, 1e-300)))
            return n, f"needs about {n:,} episodes"

        worst = _worst_stratum(ps, px, rs, rx) if res["p"] < 1e-3 else ("", "")
        rare = res["rare"]
        rare_txt = ""
        if rare:
            shown = ", ".join(f"{_fmt_row(np.frombuffer(bytes(s), np.float64))}: {weights.get(s, 0.0):.4f}" for s in rare[:3])
            rare_txt = f"; {len(rare)} rare strata ({rare_share:.4f} of visits) outside the pool" + (
                f", e.g. {shown}" if shown else "")
        out.append(_Pending(
            name, "sample", "pooled chi-square over strata + per-stratum exact", res["p"], "weighted tv", len(ps), len(rs),
            True, f"{len(tables)} strata on both sides, {len(res['pooled'])} pooled (df {df}){worst[0]}",
            f"first visits weighted by the reference's share{rare_txt}{worst[1]}",
            detectable=detectable, needed=needed, kind="transition",
        ))
    return out


def _worst_stratum(ps, px, rs, rx) -> tuple[str, str]:
    """Both sides' outcomes in the stratum whose outcome distributions differ most (total
    variation, among strata with at least 5 samples per side)."""
    best, desc = -1.0, ("", "")
    gp, gr = stats._group(ps), stats._group(rs)
    for s in gp.keys() & gr.keys():
        a, b = px[gp[s]], rx[gr[s]]
        if len(a) < 5 or len(b) < 5:
            continue
        ca, cb = _codes(a), _codes(b)
        cats = np.unique(np.concatenate([ca, cb]))
        tv = 0.5 * sum(abs(np.mean(ca == c) - np.mean(cb == c)) for c in cats)
        if tv > best:
            best = tv
            row = np.frombuffer(bytes(s), np.float64)
            desc = (
                f"; most different at {_fmt_row(row)}: {_summary_categorical(ca, a)} (n={len(a)})",
                f"; there {_summary_categorical(cb, b)} (n={len(b)})",
            )
    return desc


def _episode_statistics(port: Side, ref: Side, power, detect) -> list[_Pending]:
    out = [
        _compare("episode length", port.alive.sum(1), ref.alive.sum(1), power, detect),
        _compare("outcome (0 terminated, 1 truncated, 2 horizon)", port.outcome(), ref.outcome(), power, detect,
                 categorical=True),
    ]
    p_ret, r_ret = port.returns(), ref.returns()
    joint = _compare("return", p_ret, r_ret, power, detect)
    if joint.effect == "tv" or p_ret.shape[1] == 1:
        out.append(joint)
    else:
        out += [_compare(f"return[agent {j}]", p_ret[:, j], r_ret[:, j], power, detect) for j in range(p_ret.shape[1])]
    return out


def _initial_statistics(port0: np.ndarray, ref0: np.ndarray, discrete: bool, power, detect, more=None) -> list[_Pending]:
    """The initial observation: jointly (categorical when discrete or one-dimensional) and each
    component of a multi-dimensional one; `more(level) -> (port0, ref0)` draws more resets."""
    dims = port0.shape[1]
    out = []
    if discrete or dims == 1:
        out.append(_compare("initial observation", port0, ref0, power, detect, categorical=True if discrete else None,
                            kind="initial"))
    if dims > 1:
        cat = True if discrete else None
        out += [_compare(f"initial observation[{j}]", port0[:, j], ref0[:, j], power, detect, categorical=cat,
                         kind="initial") for j in range(dims)]
    if more is not None:
        for i, s in enumerate(out):
            def top_up(level, i=i, s=s):
                n = s.needed(level)[0] or 0
                if n > MAX_DRAWS:  # beyond the budget: the run is inconclusive without drawing in vain
                    return s
                p0, r0 = more(max(n, len(port0)))
                return _initial_statistics(p0, r0, discrete, power, detect)[i]

            s.top_up = top_up
    return out


# ---------------------------------------------------------------------------------------------
# turn-based references: a PettingZoo AECEnv, an OpenSpiel game (ply-by-ply lockstep)
# ---------------------------------------------------------------------------------------------

ILLEGAL_PROB = 0.02  # per ply, where the reference defines illegal moves: a masked-out action
CHANCE_TRIES = 32  # keys the port's step at a chance node tries to draw the reference's outcome


def _is_openspiel_game(x) -> bool:
    return type(x).__module__ == "pyspiel" and hasattr(x, "new_initial_state")


def _is_aec_env(x) -> bool:
    try:
        from pettingzoo import AECEnv
    except ImportError:
        return False
    return isinstance(x, AECEnv)


def _lockstep_fn(env, explicit_chance: bool):
    """Jitted `run(params, key, actions, outcomes, chance, valid)`: each game (vmapped) from
    `reset`, a scan over its plies. A decision ply steps with the joint action `actions[t]`, a
    chance ply (`chance[t]`) applies `outcomes[t]` with `apply_chance`, which returns no
    observation: the ply's observation is that of the port's own `step` at the chance node with the
    first of `CHANCE_TRIES` keys whose draw (`info["chance_outcome"]`) is the reference's outcome
    (`has_obs` is false where none is); padding plies (`~valid[t]`) leave the state as it is. Returns the
    initial view and, per ply, the observation, reward, flags and the view of the state after
    it (mover, mask and, with explicit chance, chance flag and outcome probabilities)."""

    def view(state, params):
        v = {"mover": env.current_player(state, params), "mask": env.legal_action_mask(state, params)}
        if explicit_chance:
            v["chance"] = env.is_chance_node(state, params)
            v["probs"] = env.chance_outcomes(state, params)
        return v

    def one(params, key, actions, outcomes, chance, valid):
        obs0, state0 = env.reset(key, params)

        def body(state, xs):
            t, action, outcome, is_chance, ok = xs
            obs, nstate, reward, term, trunc, info = env.step(jax.random.fold_in(key, t), state, action, params)
            illegal = info.get("illegal_action", jnp.zeros((), bool))
            has_obs = ~is_chance
            if explicit_chance:
                cstate = env.apply_chance(state, outcome, params)
                nstate = jax.tree.map(lambda c, s: jnp.where(is_chance, c, s), cstate, nstate)
                reward = jnp.where(is_chance, jnp.zeros_like(reward), reward)
                term, trunc, illegal = term & ~is_chance, trunc & ~is_chance, illegal & ~is_chance
                if "chance_outcome" in info:
                    tries = jax.random.split(jax.random.fold_in(key, (1 << 24) + t), CHANCE_TRIES)
                    d_obs, *_, d_info = jax.vmap(lambda k: env.step(k, state, action, params))(tries)
                    hit = d_info["chance_outcome"] == outcome
                    drawn = jax.tree.map(lambda x: x[jnp.argmax(hit)], d_obs)
                    obs = jax.tree.map(lambda d, o: jnp.where(is_chance, d, o), drawn, obs)
                    has_obs = has_obs | jnp.any(hit)
            out = {"obs": obs, "has_obs": has_obs, "reward": reward, "terminated": term, "truncated": trunc,
                   "illegal": illegal, **view(nstate, params)}
            nstate = jax.tree.map(lambda n, s: jnp.where(ok, n, s), nstate, state)
            return nstate, out

        plies = actions.shape[0]
        _, traj = jax.lax.scan(body, state0, (jnp.arange(plies), actions, outcomes, chance, valid))
        first = {"obs": obs0, "has_obs": jnp.ones((), bool), **view(state0, params)}
        return first, traj

    def run(params, key, actions, outcomes, chance, valid):
        keys = jax.random.split(key, actions.shape[0])
        return jax.vmap(one, in_axes=(None, 0, 0, 0, 0, 0))(params, keys, actions, outcomes, chance, valid)

    return _fast_jit(run)


def _states(first, traj, name):
    """`first[name]` then `traj[name]` along the ply axis: per state `[G, T + 1, ...]`."""
    return np.concatenate([np.asarray(first[name])[:, None], np.asarray(traj[name])], axis=1)


def _turn_based_spaces(env, params, ref, explicit_chance):
    """Space notes; PortMismatch when the port's agents, actions, observation size or chance
    outcomes differ from the reference's."""
    from jaxenvs.testing.reference import OpenSpielReference

    notes = []
    obs = jax.eval_shape(lambda k: env.reset(k, params)[0], jax.random.key(0))
    if not (isinstance(obs, dict) and {"observation", "action_mask"} <= obs.keys()):
        raise ValueError(
            "verify_port compares a turn-based port's observation dict {'observation', 'action_mask'} (the "
            f"full_action_set contract); {env!r} observes {jax.tree.map(lambda x: f'{x.dtype}{list(x.shape)}', obs)}"
        )
    if env.num_agents != len(ref.agents):
        raise PortMismatch("agents", f"port has {env.num_agents} agents, reference {len(ref.agents)} ({ref.agents})")
    space = env.action_space(params)
    if not isinstance(space, spaces.Discrete):
        raise ValueError(f"verify_port compares turn-based games with Discrete actions; the port's are {space!r}")
    if isinstance(ref, OpenSpielReference):
        n_ref = ref.num_actions
        ref_desc = f"num_distinct_actions() = {n_ref}"
    else:
        ref_space = ref.action_space()
        n_ref = getattr(ref_space, "n", None)
        ref_desc = repr(ref_space)
        if n_ref is None or int(getattr(ref_space, "start", 0)) != 0:
            raise PortMismatch("action space", f"port {space!r}, reference {ref_space!r} (not a Discrete space from 0)")
    if int(space.n) != int(n_ref) or int(space.start) != 0:
        raise PortMismatch("action space", f"port {space!r}, reference {ref_desc}")
    notes.append(f"action space: {space!r} == reference {ref_desc}")
    if not explicit_chance and ref.num_chance_outcomes:
        raise PortMismatch("chance outcomes", f"the reference has chance nodes ({ref.num_chance_outcomes} outcomes), the port "
                           f"none (traits.chance={env.unwrapped.traits.chance!r}; OpenSpiel's chance is 'explicit_stochastic')")
    if explicit_chance:
        k = jax.eval_shape(lambda s: env.chance_outcomes(s, params), _state_template(env, params)).shape[-1]
        if k != ref.num_chance_outcomes:
            raise PortMismatch("chance outcomes", f"port chance_outcomes has {k} outcomes, reference max_chance_outcomes() = "
                               f"{ref.num_chance_outcomes}")
        notes.append(f"chance outcomes: {k} == reference max_chance_outcomes()")
    return notes


def _first_bad(bad: np.ndarray, games: int):
    """`(game, index)` of the first True in `bad` `[G, T, ...]`, by game then index; or None."""
    bad = bad.reshape(bad.shape[0], bad.shape[1], -1).any(-1)
    if not bad.any():
        return None
    g = int(np.flatnonzero(bad.any(1))[0])
    return g, int(np.flatnonzero(bad[g])[0])


def _lockstep_statistics(ref_games, first, traj, explicit_chance, observation_name) -> tuple[list[_Pending], dict]:
    """The exact per-ply comparisons of the port's replay with the reference's games, and for
    each that differs where it first does: `(game, state, rank)` (a ply's reward and flags rank
    before the state it leads to, so the evidence shows the cause first)."""
    G, T = len(ref_games), ref_games.plies
    ply_ok = np.arange(T)[None] < ref_games.length[:, None]  # [G, T]
    state_ok = np.arange(T + 1)[None] <= ref_games.length[:, None]  # [G, S]
    n_agents = ref_games.obs.shape[2]
    n_states, n_plies = int(state_ok.sum()), int(ply_ok.sum())

    def history(g, s):
        acts = [f"chance {a}" if c else str(a) for a, c in zip(ref_games.action[g, :s], ref_games.chance[g, :s])]
        return f"game {g}, " + (f"after ply {s - 1} (plies so far: [{', '.join(acts)}])" if s else "initial state")

    first_at = {}

    def result(name, bad, port_vals, ref_vals, what, n, per_state=True):
        hit = _first_bad(bad, G)
        if hit is not None:
            first_at[name] = (hit[0], hit[1] + (0 if per_state else 1), len(first_at) + (0 if per_state else -100))
        if hit is None:
            return _Pending(name, "exact", "lockstep (every ply)", 1.0, "exact", n, n, True,
                            f"{n:,} {'states' if per_state else 'plies'} of {G:,} games", "the same at each",
                            detectable=lambda level: 0.0, kind="transition")
        g, i = hit
        where = history(g, i if per_state else i + 1)
        if not per_state:
            where += f" (ply {i}: {'chance ' if ref_games.chance[g, i] else ''}action {ref_games.action[g, i]}"
            where += ", illegal)" if ref_games.illegal[g, i] else ")"
        pv, rv, label = port_vals(g, i), ref_vals(g, i), what(g, i)
        return _Pending(name, "exact", "lockstep (every ply)", 0.0, "exact", n, n, True,
                        f"{label + ' ' if label else ''}{pv} at {where}", f"{rv}", detectable=lambda level: 0.0,
                        kind="transition")

    def floats(v) -> str:
        return "[" + ", ".join(f"{x:.7g}" for x in np.ravel(v)) + "]"


    out = []
    # mover
    p_mover = _states(first, traj, "mover")
    decided = state_ok & (ref_games.mover >= 0)
    out.append(result("mover (current_player)", decided & (p_mover != ref_games.mover),
                      lambda g, s: int(p_mover[g, s]), lambda g, s: int(ref_games.mover[g, s]),
                      lambda g, s: "current_player", int(decided.sum())))
    # legal-action mask, and the observation's copy of it
    p_mask = _states(first, traj, "mask")
    known = state_ok & ref_games.mask_known
    bad = known[..., None, None] & (p_mask != (ref_games.mask == 1))
    has_obs = _states(first, traj, "has_obs") & state_ok
    p_obs = {k: _states({"v": first["obs"][k]}, {"v": traj["obs"][k]}, "v") for k in ("observation", "action_mask")}
    copy_bad = has_obs[..., None, None] & (p_obs["action_mask"] != p_mask.astype(np.uint8))
    mask_hit, copy_hit = _first_bad(bad, G), _first_bad(copy_bad, G)
    if mask_hit is None and copy_hit is not None:
        out.append(result("legal-action mask", copy_bad, lambda g, s: p_obs["action_mask"][g, s].tolist(),
                          lambda g, s: f"legal_action_mask {p_mask[g, s].astype(int).tolist()} (the port's own)",
                          lambda g, s: 'obs["action_mask"]', int(known.sum())))
    else:
        out.append(result("legal-action mask", bad, lambda g, s: p_mask[g, s].astype(int).tolist(),
                          lambda g, s: ref_games.mask[g, s].tolist(), lambda g, s: "legal_action_mask (agents x actions)",
                          int(known.sum())))
    # observations per agent
    o_port = p_obs["observation"].reshape(G, T + 1, n_agents, -1).astype(np.float64)
    if o_port.shape[-1] != ref_games.obs.shape[-1]:
        raise PortMismatch(observation_name, f"port observation['observation'] has {o_port.shape[-1]} entries per agent, "
                           f"the reference's {observation_name} {ref_games.obs.shape[-1]}")
    port_dtype = p_obs["observation"].dtype
    # a float port's observations against the reference's rounded to its float type (OpenSpiel's
    # tensors are doubles); integer ones against the reference's values as they are
    o_ref = ref_games.obs.astype(port_dtype).astype(np.float64) if port_dtype.kind == "f" else ref_games.obs
    obad = has_obs[..., None, None] & (o_port != o_ref)

    def obs_diff(g, s, side):
        b = np.argwhere(o_port[g, s] != o_ref[g, s])
        rows = sorted({int(a) for a, _ in b})
        vals = o_port[g, s] if side == "port" else o_ref[g, s]
        return "; ".join(f"agent {a}: {vals[a].tolist()}" for a in rows)

    out.append(result(f"observation per agent ({observation_name})", obad, lambda g, s: obs_diff(g, s, "port"),
                      lambda g, s: obs_diff(g, s, "ref"), lambda g, s: 'obs["observation"]', int(has_obs.sum())))
    # rewards and the end of the game
    p_rew = np.asarray(traj["reward"], np.float64).reshape(G, T, -1)
    r_rew = ref_games.reward.astype(np.float32).astype(np.float64)
    p_term, p_trunc, p_ill = (np.asarray(traj[k]) for k in ("terminated", "truncated", "illegal"))
    decision = ply_ok & ~ref_games.chance
    rew_bad = (decision[..., None] & ref_games.reward_known & (p_rew != r_rew)).any(-1)
    exact = ref_games.flags_exact
    flag_bad = np.where(exact, (p_term != ref_games.terminated) | (p_trunc != ref_games.truncated),
                        (p_term | p_trunc) != (ref_games.terminated | ref_games.truncated)) & decision
    ill_bad = (p_ill != ref_games.illegal) & decision
    bad = rew_bad | flag_bad | ill_bad

    def fmt_ply(g, t, side):
        known = ref_games.reward_known[g, t]
        rew = p_rew[g, t] if side == "port" else r_rew[g, t]
        rew = [f"{r:g}" if k else "-" for r, k in zip(rew.tolist(), known)]
        if side == "port":
            term, trunc, ill = bool(p_term[g, t]), bool(p_trunc[g, t]), bool(p_ill[g, t])
        else:
            term, trunc, ill = bool(ref_games.terminated[g, t]), bool(ref_games.truncated[g, t]), bool(ref_games.illegal[g, t])
        s = f"reward [{', '.join(rew)}], terminated {term}, truncated {trunc}, illegal {ill}"
        return s if side == "port" or exact[g, t] else s + " (only the end of the game is compared after an illegal move)"

    out.append(result("reward and end of game (every ply)", bad, lambda g, t: fmt_ply(g, t, "port"),
                      lambda g, t: fmt_ply(g, t, "ref"), lambda g, t: "", int(decision.sum()), per_state=False))
    if explicit_chance:
        p_chance, p_probs = _states(first, traj, "chance"), _states(first, traj, "probs")
        r_probs = ref_games.probs.astype(np.float32)
        cbad = state_ok & (p_chance != ref_games.is_chance)
        pbad = (state_ok & ref_games.is_chance)[..., None] & (p_probs != r_probs)
        bad = cbad[..., None] | pbad
        out.append(result("chance nodes and outcome probabilities", bad,
                          lambda g, s: f"is_chance_node {bool(p_chance[g, s])}, chance_outcomes {floats(p_probs[g, s])}",
                          lambda g, s: f"is_chance_node {bool(ref_games.is_chance[g, s])}, chance_outcomes "
                                       f"{floats(r_probs[g, s]) if ref_games.is_chance[g, s] else '-'} (as float32)",
                          lambda g, s: "", int((state_ok & ref_games.is_chance).sum())))
    if ref_games.returns is not None:
        p_ret = np.concatenate([np.zeros((G, 1, p_rew.shape[-1])), np.cumsum(np.where(ply_ok[..., None], p_rew, 0), 1)], 1)
        p_ret = p_ret.astype(np.float32).astype(np.float64)
        r_ret = ref_games.returns.astype(np.float32).astype(np.float64)
        rbad = state_ok[..., None] & (p_ret != r_ret)
        out.append(result("returns (every state)", rbad, lambda g, s: floats(p_ret[g, s]), lambda g, s: floats(r_ret[g, s]),
                          lambda g, s: "cumulative reward", n_states))
    return out, first_at


def games_needed(detect: float, power: float) -> int:
    """Games the exact lockstep needs: a port that differs in a fraction `detect` of the
    reference's random games shows it in at least one of `G` games with probability
    `1 - (1 - detect)^G >= power`."""
    return int(math.ceil(math.log(1.0 - power) / math.log(1.0 - detect)))


def _games_detectable(games: int, power: float) -> float:
    """The smallest fraction of differing games that `games` games catch with probability `power`."""
    return 1.0 - (1.0 - power) ** (1.0 / max(games, 1))


def _verify_turn_based(port_env, env, params, ref, num_games, seed, alpha, detect, power, reference_cache, t_start,
                       raise_inconclusive=True):
    """`verify_port` against a `TurnBasedReference`: the reference plays `num_games` games with
    random legal moves (and illegal ones where it defines them); the port replays every game in
    one compiled call; every ply is compared exactly."""
    from jaxenvs.testing.reference import AECReference

    traits = env.unwrapped.traits
    if traits.dynamics != "sequential" or traits.action_style != "full_action_set":
        raise ValueError(
            f"verify_port compares a turn-based reference ({type(ref).__name__}) with a sequential full_action_set port; "
            f"{port_env!r} has dynamics={traits.dynamics!r}, action_style={traits.action_style!r}"
        )
    explicit_chance = traits.chance == "explicit_stochastic"
    if traits.chance == "stochastic" or (isinstance(ref, AECReference) and traits.chance != "deterministic"):
        raise ValueError(
            f"verify_port replays the reference's games move for move, which needs a port whose only randomness is "
            f"explicit chance (OpenSpiel) or none (PettingZoo AEC); {port_env!r} has chance={traits.chance!r}"
        )
    space_notes = _turn_based_spaces(env, params, ref, explicit_chance)
    cache_notes = []
    cache_key = (ref.fingerprint(), seed, num_games, ILLEGAL_PROB) if reference_cache is not None else None
    games = reference_cache.get(cache_key) if cache_key is not None else None
    if games is not None:
        cache_notes.append(f"games 0..{num_games - 1}")
    else:
        games = ref.play(seed, num_games, ILLEGAL_PROB)
        if cache_key is not None:
            reference_cache.put(cache_key, games)
    G, T = len(games), games.plies
    plies = 1 << max(0, int(T - 1).bit_length())  # padded to a power of two: one compile serves similar runs
    A = env.num_agents
    rng = np.random.default_rng([seed, 4])
    n = int(env.action_space(params).n)
    actions = rng.integers(0, n, size=(G, plies, A)).astype(np.int32)  # the non-movers' rows: any action
    movers = np.maximum(games.mover[:, :T], 0)
    gi, ti = np.nonzero(np.arange(T)[None] < games.length[:, None])
    actions[gi, ti, movers[gi, ti]] = games.action[gi, ti]
    pad = lambda x, fill=0: np.concatenate([x, np.full((G, plies - T) + x.shape[2:], fill, x.dtype)], 1)  # noqa: E731
    outcomes = pad(np.where(games.chance, games.action, 0).astype(np.int32))
    chance = pad(games.chance)
    valid = pad(np.arange(T)[None] < games.length[:, None])
    fn = _compiled("lockstep", _lockstep_fn, env, explicit_chance)
    first, traj = fn(params, jax.random.key(seed), actions, outcomes, chance, valid)
    first = jax.tree.map(np.asarray, first)
    traj = jax.tree.map(lambda x: np.asarray(x)[:, :T], traj)
    pending, first_at = _lockstep_statistics(games, first, traj, explicit_chance, ref.observation_name)

    level = alpha / len(pending)
    certified = _games_detectable(G, power)
    needed_games = games_needed(detect, power)
    for p in pending:  # an exact comparison over G random games detects a fraction `certified` of them differing
        p.effect = "games differing"
        p.detectable = lambda level, c=certified: c
        p.needed = lambda level, n=needed_games: (n, f"needs {n:,} games")
    statistics = tuple(p.finish(level, detect) for p in pending)
    failed = [s for s in statistics if s.p_value < level]
    verdict = "fail" if failed else ("inconclusive" if certified > detect else "pass")
    n_plies = int(games.length.sum())
    n_chance = int((games.chance & (np.arange(T)[None] < games.length[:, None])).sum())
    ends = games.length - 1
    last_reward = games.reward[np.arange(G), ends]
    last_illegal = games.illegal[np.arange(G), ends]
    outcomes_seen = {}
    for r in last_reward[~last_illegal]:
        k = "draw" if not r.any() else f"agent {int(np.argmax(r))} ahead"
        outcomes_seen[k] = outcomes_seen.get(k, 0) + 1
    notes = [
        f"{type(ref).__name__}: {G:,} games, {n_plies:,} plies ({int(games.illegal.sum()):,} illegal moves, {n_chance:,} "
        f"chance plies), {int(games.length.min())}..{int(games.length.max())} plies a game; final outcomes "
        + ", ".join(f"{k}: {v}" for k, v in sorted(outcomes_seen.items())),
        "moves are the reference's: uniformly random legal ones"
        + (f", and with probability {ILLEGAL_PROB:g} per ply one its mask excludes (it defines what they do)"
           if ref.illegal_defined else " (the reference does not define illegal moves: none played)")
        + "; the non-movers' rows of the port's joint action hold random actions, which it must ignore",
    ]
    if isinstance(ref, AECReference) and ref.illegal_defined:
        notes.append("after an illegal move: the mover's reward and the end of the game compared (PettingZoo gives the "
                     "others 0 and sets terminations and truncations; the jaxenvs contract +1/(n-1) and terminated)")
    if explicit_chance:
        seen = int((np.asarray(traj["has_obs"]) & games.chance & (np.arange(T)[None] < games.length[:, None])).sum())
        notes.append(f"chance plies are applied with apply_chance; the observation after one is the port's own step's at "
                     f"the chance node where one of {CHANCE_TRIES} keys drew the reference's outcome ({seen:,} of "
                     f"{n_chance:,} chance plies; the others' are compared at the next decision)")
    report = _port_report(
        ref, port_env, env,
        verdict=verdict,
        tiers=("exact",),
        num_episodes=G,
        horizon=T,
        seed=seed,
        alpha=alpha,
        detect=detect,
        power=power,
        threshold=level,
        spaces=tuple(space_notes),
        statistics=statistics,
        states_checked=int((np.arange(T + 1)[None] <= games.length[:, None]).sum()),
        episodes_needed=needed_games if verdict == "inconclusive" else None,
        cache=f"reference games reused from a ReferenceCache ({', '.join(cache_notes)})" if cache_notes else None,
        seconds=time.perf_counter() - t_start,
        notes=tuple(notes),
    )
    if failed:
        s = min(failed, key=lambda s: first_at[s.name])  # the earliest difference: game, then ply
        others = [f.name for f in failed if f is not s]
        more = f" (also differing: {'; '.join(others)})" if others else ""
        raise PortMismatch(s.name, f"exact lockstep: port {s.port}; reference {s.reference}{more}", report)
    if verdict == "inconclusive" and raise_inconclusive:
        raise PortInconclusive(
            f"inconclusive after {G:,} games: every ply agrees, but {G:,} random games catch a port that differs in a "
            f"fraction {certified:.3g} of them with probability {power:g}, above detect={detect:g}; "
            f"{needed_games:,} games would do (num_episodes={needed_games})", report)
    return report


# ---------------------------------------------------------------------------------------------
# verify_port
# ---------------------------------------------------------------------------------------------


def _check_in_space(space, stacked_obs, lead: int, converted):
    """Raise unless every row of `stacked_obs` (the reference's initial observations, then its
    last ones) lies in the port's observation `space`."""
    contains = space.contains
    for _ in range(1 + lead):
        contains = jax.vmap(contains)
    fn = _CONTAINS.get((repr(space), lead))
    if fn is None:
        fn = _CONTAINS[(repr(space), lead)] = _fast_jit(contains)
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
    at most `alpha` (default 1e-3). Where the `num_episodes` episodes fall short it runs up to
    `max_episodes` (default 10,000) on each side, then reports inconclusive with the episodes
    needed.

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
    action` acts on both sides (default: `_default_policy`). `reference_cache` (a
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
    if not (callable(reference) or _is_openspiel_game(reference)):
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
    horizon = _time_limit(env) or HORIZON
    multi, num_agents = env.multi_agent, env.num_agents
    lead = 1 if multi else 0  # agent axis of observations and actions
    stochastic = env.unwrapped.traits.chance != "deterministic"

    # ---- 1. spaces ----------------------------------------------------------------------------
    probe = reference if _is_openspiel_game(reference) else reference()
    if _is_openspiel_game(probe) or _is_aec_env(probe):
        from jaxenvs.testing.reference import AECReference, OpenSpielReference

        given = {"state_to_jax": state_to_jax, "obs_to_jax": obs_to_jax, "action_to_reference": action_to_reference,
                 "policy": policy, "transition_probs": transition_probs}
        unused = sorted(k for k, v in given.items() if v is not None)
        if unused:
            raise ValueError(f"verify_port: {', '.join(unused)} cannot be used with a turn-based reference (a "
                             "pettingzoo.AECEnv or pyspiel.Game): its games are replayed move for move, actions and "
                             "observations compared as they are")
        ref = OpenSpielReference(probe) if _is_openspiel_game(probe) else AECReference(reference, probe)
        return _verify_turn_based(port_env, env, params, ref, num_episodes, seed, alpha, detect, power,
                                  reference_cache, t_start, raise_inconclusive)
    require("scipy.stats", extra="verify", purpose="jaxenvs.testing.verify_port")  # the statistics (not turn-based)
    if isinstance(probe, type) or not hasattr(probe, "reset"):
        raise TypeError(f"verify_port: reference() returned {probe!r}, not an environment with reset and step")
    ref_multi = _is_parallel_env(probe)
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
        if not _same_space(port_space, ref_as_jax):
            raise PortMismatch(which, f"port {port_space!r}, reference {ref_space!r}")
        space_notes.append(f"{which}: {port_space!r} == reference {ref_space!r}")

    # ---- 2. the port's run --------------------------------------------------------------------
    key = jax.random.key(seed)
    if policy is None:
        pol = _DEFAULT_POLICIES.setdefault((repr(act_space), num_agents, multi), _default_policy(act_space, num_agents, multi))
    else:
        pol = _UserPolicy(policy)
    rollout = _compiled("rollout", _port_rollout_fn, env, pol, horizon, False)

    def port_episodes(start: int, count: int) -> Side:
        obs0, (o, a, no, r, te, tr, al) = rollout(params, key, start, count)
        return Side(_flat(obs0, 1), _flat(o, 2), _flat(a, 2), _flat(no, 2),
                    np.asarray(r, np.float64).reshape(count, horizon, -1), np.asarray(te), np.asarray(tr), np.asarray(al))

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
            return {ag: _to_python(a[i]) for i, ag in enumerate(agents)}
        return _to_python(a)

    def check_action(a, a_ref):
        if action_to_reference is not None and not _ref_contains(ref_act_space, a_ref, agents):
            raise PortMismatch("action space", f"action_to_reference({a!r}) = {a_ref!r} is not in the reference's {ref_act_space!r}")

    ref = GymReference(reference, probe, multi, convert_obs, convert_action, check_action)
    policy_batch = _batched_policy_fn(pol)

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
        _rebuild_state(env, _state_template(env, params), 0)  # refuse other wrappers early
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
    ref_side, recorded = reference_episodes(0, num_episodes, wanted, resamples)
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
    exact: list[_Pending] = []
    recorded_eps = num_episodes

    def from_state_stat(recorded) -> _Pending:
        per_episode = len(recorded) / max(recorded_eps, 1)
        p = _from_state(env, params, recorded, key, discrete_obs, power, detect, seed, per_episode)
        p.required = not (discrete_obs and discrete_act) and not model_ok
        return p

    if recorded and not stochastic:
        exact.append(_step_from_states(env, params, [r for r in recorded if r[0] < num_episodes], key, stochastic,
                                       power, detect))
        starts = {i: core for i, t, core, _, _ in recorded if t == 0}
        exact.append(_replay_trajectories(env, params, horizon, ref_side, starts, act_template))
    modelled: list[_Pending] = []
    if model_ok:
        if model.initial is not None:
            modelled.append(_model_initial(env, params, key, model, power, detect))
        modelled.append(_model_transitions(env, params, pol, horizon, key, model, int(act_space.n), num_episodes, power,
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
            p0 = _flat(_compiled("reset", _port_reset_fn, env)(params, key, 0, n), 1)
            have = min(n, len(ref_side))
            r0 = ref_side.obs0[:have]
            if n > have:
                r0 = np.concatenate([r0, ref.initial_observations(seed, have, n)])
            initial_draws[n] = (p0, r0)
        return initial_draws[n]

    def sample_tier(port_side: Side, ref_side: Side) -> list[_Pending]:
        out = []
        if not initial_exact:
            out += _initial_statistics(port_side.obs0, ref_side.obs0, discrete_obs, power, detect, more_initial)
        out += _episode_statistics(port_side, ref_side, power, detect)
        if discrete_obs and discrete_act:
            out += _transition_statistics(port_side, ref_side, power, detect)
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
    round_cost = time.perf_counter() - t_round
    per_episode_s = round_cost / num_episodes
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
    report = _port_report(
        ref, port_env, env,
        verdict=verdict,
        tiers=tuple(t for t in ("exact", "model", "from-state", "sample") if any(s.tier == t for s in statistics)),
        num_episodes=episodes,
        horizon=horizon,
        seed=seed,
        alpha=alpha,
        detect=detect,
        power=power,
        threshold=level,
        spaces=tuple(space_notes),
        statistics=statistics,
        states_checked=len(recorded),
        budget_s=budget_s,
        budget_needed_s=budget_needed,
        episodes_needed=episodes_needed,
        cache=f"reference rollouts reused from a ReferenceCache ({', '.join(cache_notes)})" if cache_notes else None,
        seconds=time.perf_counter() - t_start,
        notes=tuple(notes),
    )
    if failed:
        s = min(failed, key=lambda s: s.p_value)
        raise PortMismatch(
            s.name,
            f"{s.tier} {s.test} p={s.p_value:.3g} < alpha/(m rounds) = {alpha:g}/({len(statistics)} x {rounds}); "
            f"port (n={s.n_port}): {s.port}; reference (n={s.n_reference}): {s.reference}",
            report,
        )
    if short and raise_inconclusive:
        lines = [f"{s.name} ({s.tier}): detects {s.effect} {s.detectable:.3g} > detect={detect:g}; {s.needed}" for s in short]
        more = f"; about {episodes_needed:,} episodes would do (max_episodes={max_episodes:,})" if episodes_needed else ""
        raise PortInconclusive(
            f"inconclusive after {episodes} episodes: nothing differs at alpha={alpha:g}, but "
            + "; ".join(lines) + more + ". Raise max_episodes, pass state_to_jax or transition_probs for an exact "
            "tier, or accept a larger detect.",
            report,
        )
    return report


def _last_obs(side: Side) -> np.ndarray:
    """Each episode's last observation (its initial one when it took no step)."""
    steps = side.alive.sum(1)
    last = side.obs0.copy()
    idx = np.flatnonzero(steps > 0)
    last[idx] = side.nobs[idx, steps[idx] - 1]
    return last


def _port_report(ref, port_env, env, **fields) -> "PortReport":
    """A `PortReport` naming the port (its repr and spec id) and the reference with the versions
    of both sides; ``fields`` are the rest of the report."""
    import jaxenvs

    name, versions = ref.describe()
    spec = getattr(port_env, "spec", None) or getattr(env, "spec", None)
    return PortReport(
        port=repr(port_env),
        port_id=getattr(spec, "id", None),
        reference=name,
        versions={"jaxenvs": jaxenvs.__version__, "jax": jax.__version__, **versions},
        **fields,
    )
