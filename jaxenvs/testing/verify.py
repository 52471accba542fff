"""``verify_port``: check that a jaxenvs environment behaves like the environment it was ported from.

Both sides are run with one policy for ``num_episodes`` episodes (the jaxenvs side in one
compiled call, the episodes vmapped, the steps in a while loop until every episode has ended; the
reference side in lockstep, the policy called once per step for all episodes). Then, in this
order:

1. spaces: the reference's spaces converted with :func:`jaxenvs.spaces.from_gymnasium` equal the
   port's (bounds, shapes, integer vs. float); with ``obs_to_jax``/``action_to_reference`` given,
   every converted observation lies in the port's observation space and every converted action in
   the reference's action space instead;
2. with ``state_to_jax``: transitions from states the reference visited (up to
   :data:`MAX_STATES`), where both sides step with the same action. A port whose traits say
   ``chance="deterministic"`` must give the reference's observation, reward and flags exactly
   (floats within ``rtol=1e-5, atol=1e-6``: float32 against float64); for a stochastic port each
   state is stepped :data:`RESAMPLES` times on each side (copies of the reference, reseeded through
   ``np_random``) and the outcomes are compared as distributions, stratified by state;
3. two-sample tests of: the initial observation (jointly when discrete, and each component),
   the episode length, the outcome (terminated / truncated / still running at the
   horizon), the return (per agent), and for discrete observations and actions the next
   observation with ``terminated``, and the reward, conditioned on ``(observation, action)``. Within
   an episode only the first visit of each ``(observation, action)`` counts, so the samples of a
   stratum come from distinct, independent episodes.

The tests are those of :mod:`jaxenvs.testing.stats` (numpy only): categorical data (at most
:data:`MAX_CATEGORIES` distinct values, or integer observations) by Pearson's chi-square with an
exact per-category binomial test, real data by Kolmogorov-Smirnov; values are compared after
rounding to float32 and 5 significant digits (float32 against float64 sums). Each statistic is judged at
``alpha / m`` for the ``m`` statistics computed (Bonferroni), so a faithful port fails with
probability at most ``alpha``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import time
from collections.abc import Mapping
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import spaces
from jaxenvs.checker import _compiler_options  # XLA's cheapest passes: these programs run briefly
from jaxenvs.checker import _jit as _fast_jit
from jaxenvs.core import Environment
from jaxenvs.testing import stats
from jaxenvs.wrappers.base import (
    AutoReset,
    TimeLimit,
    TimeLimitState,
    WithParams,
    Wrapper,
    has_wrapper,
    strip_autoreset,
    tree_select,
)

__all__ = ["verify_port", "PortMismatch", "PortReport", "Statistic", "MAX_STATES", "RESAMPLES", "HORIZON"]

HORIZON = 1000  # steps per episode when the port has no TimeLimit
MAX_STATES = 512  # reference states whose transitions are checked with state_to_jax
RESAMPLES = 8  # samples per side and state when the port's step is stochastic
MAX_CATEGORIES = 32  # a scalar statistic with at most this many distinct values is categorical
RTOL, ATOL = 1e-5, 1e-6
# reference rollouts by (reference, conversions, policy, sizes, seed): checking several ports
# against one reference object (mutants of a port, a port being mended) runs the reference once
_REFERENCE_RUNS: dict = {}
_REFERENCE_CACHE_SIZE = 8
_DEFAULT_POLICIES: dict = {}
_CONTAINS: dict = {}  # compiled space.contains by (space, agent axes)  # by action space: one compiled policy serves every port of that space
STICKINESS = 0.75  # the default policy's largest probability of repeating its episode's action


class PortMismatch(AssertionError):
    """The port and the reference differ. ``statistic`` names what differs (a :class:`Statistic`'s
    name, ``"observation space"``, ``"action space"`` or ``"transition"``); the message gives both
    sides' values and sample sizes."""

    def __init__(self, statistic: str, message: str):
        self.statistic = statistic
        super().__init__(f"{statistic}: {message}")


@dataclasses.dataclass(frozen=True)
class Statistic:
    """One two-sample comparison: ``test`` is ``"chi-square"`` (categorical), ``"ks"``
    (Kolmogorov-Smirnov) or ``"stratified chi-square"``; ``port``/``reference`` summarise each
    side's sample of ``n_port``/``n_reference`` values."""

    name: str
    test: str
    p_value: float
    n_port: int
    n_reference: int
    port: str
    reference: str


@dataclasses.dataclass(frozen=True)
class PortReport:
    """What :func:`verify_port` compared; every statistic passed at ``threshold = alpha / m``."""

    env: str
    num_episodes: int
    horizon: int
    alpha: float
    threshold: float
    spaces: tuple[str, ...]  # what the space checks compared
    statistics: tuple[Statistic, ...]
    states_checked: int  # reference states stepped on both sides (state_to_jax), 0 without
    seconds: float

    def __str__(self) -> str:
        lines = [
            f"{self.env}: {self.num_episodes} episodes (horizon {self.horizon}), "
            f"{len(self.statistics)} statistics at alpha={self.alpha:g} (each at {self.threshold:.2g}), "
            f"{self.states_checked} states stepped on both sides, {self.seconds:.1f} s",
            *(f"  {s}" for s in self.spaces),
        ]
        for s in self.statistics:
            lines.append(f"  {s.name:<36} {s.test:<22} p={s.p_value:<9.3g} n={s.n_port}/{s.n_reference}")
        return "\n".join(lines)


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
    """The state of the (AutoReset-free) wrapper chain ``env`` around ``core_state`` after ``t``
    steps of an episode."""
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
    """float64[*batch_shape, D]: the leaves of ``tree`` flattened after ``batch`` leading axes (an
    agent axis included), concatenated in pytree order."""
    leaves = [np.asarray(x) for x in jax.tree.leaves(tree)]
    shape = leaves[0].shape[:batch]
    return np.concatenate([x.reshape(shape + (-1,)).astype(np.float64) for x in leaves], axis=-1)


def _codes(rows: np.ndarray) -> np.ndarray:
    """One hashable code (a void scalar) per row of a 2-d array."""
    rows = np.ascontiguousarray(rows, np.float64) + 0.0  # -0.0 -> 0.0
    return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1])))[:, 0]


def _quantize(x: np.ndarray) -> np.ndarray:
    """Floats as float32 rounded to 5 significant digits: categories for stochastic outputs."""
    x = np.asarray(x, np.float32).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mag = np.where(x == 0, 1.0, 10.0 ** np.floor(np.log10(np.abs(np.where(x == 0, 1.0, x)))))
    return np.round(x / mag, 4) * mag


def _summary_categorical(codes: np.ndarray, rows: np.ndarray) -> str:
    if len(codes) == 0:
        return "no samples"
    uniq, idx, counts = np.unique(codes, return_index=True, return_counts=True)
    order = np.argsort(-counts)[:4]
    parts = [f"{_fmt_row(rows[idx[i]])}: {counts[i] / len(codes):.3f}" for i in order]
    more = f", ... ({len(uniq)} values)" if len(uniq) > 4 else ""
    return "{" + ", ".join(parts) + more + "}"


def _fmt_row(row) -> str:
    vals = [f"{v:g}" for v in np.asarray(row).ravel()]
    return vals[0] if len(vals) == 1 else "(" + ", ".join(vals) + ")"


def _summary_real(x: np.ndarray) -> str:
    if len(x) == 0:
        return "no samples"
    q = np.quantile(x, [0.1, 0.5, 0.9])
    return f"mean {np.mean(x):.4g}, sd {np.std(x):.3g}, 10/50/90% {q[0]:.4g}/{q[1]:.4g}/{q[2]:.4g}"


def _compare(name: str, x: np.ndarray, y: np.ndarray, categorical: bool | None = None) -> Statistic:
    """Two-sample test of rows ``x`` [n, D] and ``y`` [m, D]: categorical when ``categorical`` or
    (``None``) when at most MAX_CATEGORIES distinct rows occur; else KS (D must be 1)."""
    # rounded to float32 and 5 significant digits: sums of float32 rewards that differ in the last
    # bits are one value, not two that a KS test would tell apart
    x, y = _quantize(np.reshape(x, (len(x), -1))), _quantize(np.reshape(y, (len(y), -1)))
    cx, cy = _codes(x), _codes(y)
    if categorical is None:
        categorical = len(np.unique(np.concatenate([cx, cy]))) <= MAX_CATEGORIES
    if categorical:
        p = stats.categorical_test(cx, cy)
        return Statistic(name, "chi-square", p, len(x), len(y), _summary_categorical(cx, x), _summary_categorical(cy, y))
    _, p = stats.ks_test(x[:, 0], y[:, 0])
    return Statistic(name, "ks", p, len(x), len(y), _summary_real(x[:, 0]), _summary_real(y[:, 0]))


def _is_parallel_env(ref) -> bool:
    try:
        import gymnasium

        if isinstance(ref, gymnasium.Env):
            return False
    except ImportError:
        pass
    return hasattr(ref, "possible_agents")


def _ref_space(ref, which: str, multi: bool):
    if not multi:
        return getattr(ref, which)
    agent_spaces = [getattr(ref, which)(a) for a in ref.possible_agents]
    return agent_spaces[0]


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


# ---------------------------------------------------------------------------------------------
# policies and the port's rollout
# ---------------------------------------------------------------------------------------------


def _default_policy(space: spaces.Space, num_agents: int, multi: bool):
    """``(episode_key, step_key, obs) -> action``. Half the episodes act uniformly at random; the
    other half repeat an action drawn once per episode with a probability drawn per episode from
    ``[0, STICKINESS)`` (else uniform), so that walls, corners and runs in one direction are
    reached too. An observation holding an ``"action_mask"`` (envs with legal actions) restricts
    both to the legal actions: uniform among them, and the favourite only where it is legal."""

    def one(ek, sk, mask=None):
        k_mode, k_fav, k_p = jax.random.split(ek, 3)
        fav = space.sample(k_fav)
        stick = jax.random.uniform(k_p, maxval=STICKINESS) * (jax.random.uniform(k_mode) < 0.5)
        ku, kc = jax.random.split(sk)
        use = jax.random.uniform(kc) < stick
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


def _episode_keys(seed_key, index):
    """The keys of episode ``index`` (traced): reset, step, the policy's per-episode and per-step
    keys. One derivation inside the compiled functions serves both sides."""
    k_reset, k_step, k_ep, k_policy = jax.random.split(seed_key, 4)
    fold = lambda k: jax.random.fold_in(k, index)  # noqa: E731
    return fold(k_reset), fold(k_step), fold(k_ep), fold(k_policy)


def _env_key(env):
    """A key under which ports compute alike given the same params: the wrapper chain without
    ``WithParams`` (params are arguments of the compiled functions), the base class and its
    constructor's attributes; the env itself when some wrapper or attribute is not understood."""
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


def _port_rollout_fn(env, policy, horizon: int):
    """Jitted: ``num_episodes`` episodes (vmapped) of at most ``horizon`` steps; a while loop that
    stops once every episode has ended, writing each step into ``[horizon]`` buffers."""

    def episode(params, seed_key, index):
        reset_key, step_key, ep_key, policy_key = _episode_keys(seed_key, index)
        obs0, state0 = env.reset(reset_key, params)

        def transition(t, obs, state):
            action = policy(ep_key, jax.random.fold_in(policy_key, t), obs)
            out = env.step(jax.random.fold_in(step_key, t), state, action, params)
            return action, out

        # buffers shaped like one transition, with a leading [horizon] axis
        action_aval, out_aval = jax.eval_shape(transition, 0, obs0, state0)
        zeros = lambda x: jnp.zeros((horizon,) + x.shape, x.dtype)  # noqa: E731
        record = (obs0, action_aval, out_aval[0], out_aval[2], out_aval[3], out_aval[4])
        buffers = jax.tree.map(zeros, record)

        def cond(carry):
            t, _, _, done, _ = carry
            return (t < horizon) & ~done

        def body(carry):
            t, obs, state, _, buffers = carry
            action, (nobs, nstate, reward, term, trunc, _) = transition(t, obs, state)
            buffers = jax.tree.map(lambda b, x: b.at[t].set(x), buffers, (obs, action, nobs, reward, term, trunc))
            return t + 1, nobs, nstate, term | trunc, buffers

        t, _, _, _, buffers = jax.lax.while_loop(cond, body, (jnp.int32(0), obs0, state0, jnp.zeros((), bool), buffers))
        alive = jnp.arange(horizon) < t
        return obs0, buffers + (alive,)

    def run(params, seed_key, num_episodes: int):
        return jax.vmap(episode, in_axes=(None, None, 0))(params, seed_key, jnp.arange(num_episodes))

    return _fast_jit_static(run, 2)


def _fast_jit_static(fn, *static):
    return jax.jit(fn, static_argnums=static, compiler_options=_compiler_options(jax.default_backend()))


@functools.lru_cache(maxsize=32)
def _batched_policy_fn(policy):
    def act(seed_key, t, obs, num_episodes: int):
        def one(index, o):
            _, _, ep_key, policy_key = _episode_keys(seed_key, index)
            return policy(ep_key, jax.random.fold_in(policy_key, t), o)

        return jax.vmap(one)(jnp.arange(num_episodes), obs)

    return _fast_jit_static(act, 3)


def _state_step_fn(env, samples: int):
    def one(params, state, action, key):
        keys = jax.random.split(key, samples)
        nobs, _, reward, term, trunc, _ = jax.vmap(lambda k: env.step(k, state, action, params))(keys)
        return nobs, reward, term, trunc

    def run(params, states, actions, seed_key):
        keys = jax.random.split(jax.random.fold_in(seed_key, 1 << 30), len(actions))
        return jax.vmap(one, in_axes=(None, 0, 0, 0))(params, states, actions, keys)

    return _fast_jit(run)


# ---------------------------------------------------------------------------------------------
# verify_port
# ---------------------------------------------------------------------------------------------


def verify_port(
    env: Environment,
    reference: Callable[[], Any],
    *,
    state_to_jax: Callable[[Any], Any] | None = None,
    obs_to_jax: Callable[[Any], Any] | None = None,
    action_to_reference: Callable[[np.ndarray], Any] | None = None,
    policy: Callable[[jax.Array, Any], Any] | None = None,
    num_episodes: int = 1000,
    seed: int = 0,
    alpha: float = 1e-3,
) -> PortReport:
    """Check that ``env`` (a jaxenvs port) behaves like ``reference``; raise :class:`PortMismatch`
    naming the first statistic or transition that differs, or return a :class:`PortReport`.

    ``env`` is checked without its outermost :class:`~jaxenvs.wrappers.AutoReset` (episodes end);
    a :class:`~jaxenvs.wrappers.TimeLimit` is kept and sets the horizon (else :data:`HORIZON`
    steps; episodes still running there count as the outcome ``"horizon"`` on both sides).
    ``reference`` is a zero-argument callable returning a fresh ``gymnasium.Env`` (or a
    ``pettingzoo.ParallelEnv`` for a multi-agent port: observations and rewards are stacked in
    ``possible_agents`` order, an episode ends when any agent terminates or is truncated); it is
    called once per episode and reset with a seed drawn from ``seed``.

    ``state_to_jax(reference_env)`` returns the unwrapped port's state (what
    ``env.unwrapped.reset_env`` returns) for the reference's current state; TimeLimit's step count
    is rebuilt from the steps taken. ``obs_to_jax`` maps a reference observation to the port's
    (cast to the port's dtypes), ``action_to_reference`` a port action (numpy) to the reference's
    (default: Python ints for scalar discrete actions, arrays otherwise; for a ParallelEnv a dict
    over ``possible_agents``). ``policy(key, obs) -> action`` acts on both sides (default: see
    :func:`_default_policy`). ``alpha`` is the probability that a faithful port is rejected.
    Takes a few seconds for a small environment with the defaults.
    """
    t_start = time.perf_counter()
    for name, v, lo in (("num_episodes", num_episodes, 10), ("seed", seed, 0)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < lo:
            raise ValueError(f"verify_port needs {name} as an int >= {lo}, got {v!r}")
    if not isinstance(alpha, (float, int)) or isinstance(alpha, bool) or not 0 < alpha < 1:
        raise ValueError(f"verify_port needs alpha in (0, 1), got {alpha!r}")
    if not isinstance(env, Environment):
        raise TypeError(f"verify_port checks a jaxenvs Environment, got {type(env).__name__}")
    if not callable(reference):
        raise TypeError(
            "verify_port needs reference as a zero-argument callable returning a gymnasium.Env or "
            f"pettingzoo.ParallelEnv (e.g. lambda: gymnasium.make(...)), got {type(reference).__name__}"
        )
    env = strip_autoreset(env)
    if has_wrapper(env, AutoReset):
        raise ValueError("verify_port needs AutoReset outermost (or absent): it checks episodes that end")
    num_episodes = int(num_episodes)
    params = env.default_params
    horizon = _time_limit(env) or HORIZON
    multi = env.multi_agent
    num_agents = env.num_agents
    lead = 1 if multi else 0  # agent axis of observations and actions

    ref_probe = reference()
    ref_multi = _is_parallel_env(ref_probe)
    if ref_multi != multi:
        raise ValueError(
            f"verify_port: the port has {num_agents} agent(s) but the reference is a "
            f"{'pettingzoo ParallelEnv' if ref_multi else 'gymnasium.Env'}; a multi-agent port needs a ParallelEnv"
        )
    agents = list(ref_probe.possible_agents) if multi else []
    if multi and len(agents) != num_agents:
        raise PortMismatch("agents", f"port has {num_agents} agents, reference {len(agents)} ({agents})")

    # ---- 1. spaces ----------------------------------------------------------------------------
    space_notes = []
    obs_space, act_space = env.observation_space(params), env.action_space(params)
    for which, port_space, converted in (
        ("observation space", obs_space, obs_to_jax),
        ("action space", act_space, action_to_reference),
    ):
        if converted is not None:
            space_notes.append(f"{which}: checked through the conversion on every sample")
            continue
        ref_space = _ref_space(ref_probe, which.replace(" ", "_"), multi)
        try:
            ref_as_jax = spaces.from_gymnasium(ref_space)
        except (TypeError, ImportError) as e:
            raise PortMismatch(which, f"the reference's {ref_space!r} has no jaxenvs equivalent ({e}); pass a conversion") from e
        if not _same_space(port_space, ref_as_jax):
            raise PortMismatch(which, f"port {port_space!r}, reference {ref_space!r}")
        space_notes.append(f"{which}: {port_space!r} == reference {ref_space!r}")
    ref_act_space = _ref_space(ref_probe, "action_space", multi)

    # ---- the port's rollout -------------------------------------------------------------------
    key = jax.random.key(seed)
    if policy is None:
        pol = _DEFAULT_POLICIES.setdefault(
            (repr(act_space), num_agents, multi), _default_policy(act_space, num_agents, multi)
        )
    else:
        if not callable(policy):
            raise TypeError(f"verify_port needs policy as a callable (key, obs) -> action, got {type(policy).__name__}")
        pol = _UserPolicy(policy)
    run = _compiled("rollout", _port_rollout_fn, env, pol, horizon)
    obs0, (p_obs, p_act, p_nobs, p_rew, p_term, p_trunc, p_alive) = run(params, key, num_episodes)
    port = _Side(
        obs0=_flat(obs0, 1),
        obs=_flat(p_obs, 2),
        act=_flat(p_act, 2),
        nobs=_flat(p_nobs, 2),
        rew=np.asarray(p_rew, np.float64).reshape(num_episodes, horizon, -1),
        term=np.asarray(p_term),
        trunc=np.asarray(p_trunc),
        alive=np.asarray(p_alive),
    )
    obs_template = jax.tree.map(lambda x: np.asarray(x[0]), obs0)
    obs_treedef = jax.tree.structure(obs_template)
    obs_dtypes = [x.dtype for x in jax.tree.leaves(obs_template)]
    discrete_obs = all(dt.kind in "iub" for dt in obs_dtypes)
    discrete_act = isinstance(act_space, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary))

    # ---- the reference's rollout --------------------------------------------------------------
    t_leaves = jax.tree.leaves(obs_template)
    sizes = [x.size for x in t_leaves]

    def convert_obs(o) -> np.ndarray:
        """A reference observation as the port's, flattened to float64[D]."""
        if obs_to_jax is not None:
            o = obs_to_jax(o)
        elif multi:
            o = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *[o[a] for a in agents])
        leaves, treedef = jax.tree.flatten(o)
        if treedef != obs_treedef:
            raise PortMismatch(
                "observation structure", f"port observations are {obs_treedef}, the reference's (converted) {treedef}"
            )
        flat = []
        for x, tl in zip(leaves, t_leaves):
            x = np.asarray(x, tl.dtype)
            if x.shape != tl.shape:
                raise PortMismatch("observation structure", f"port observation leaf of shape {tl.shape}, reference {x.shape}")
            flat.append(x.ravel())
        return np.concatenate(flat).astype(np.float64)

    splits = np.cumsum(sizes)[:-1]

    def unflatten(rows: np.ndarray):
        parts = np.split(rows, splits, axis=1)
        return jax.tree.unflatten(
            obs_treedef, [p.reshape((len(rows),) + tl.shape).astype(tl.dtype) for p, tl in zip(parts, t_leaves)]
        )

    def convert_action(a):
        if action_to_reference is not None:
            return action_to_reference(a)
        if multi:
            return {ag: _to_python(a[i]) for i, ag in enumerate(agents)}
        return _to_python(a)

    def run_reference():
        rng = np.random.default_rng(seed)
        seeds = rng.integers(0, 2**31 - 1, size=num_episodes)
        envs = [reference() for _ in range(num_episodes - 1)]
        envs.insert(0, ref_probe)
        cur = np.stack([convert_obs(e.reset(seed=int(sd))[0]) for e, sd in zip(envs, seeds)])
        ref = _Side(
            obs0=cur.copy(),
            obs=np.zeros(port.obs.shape),
            act=np.zeros(port.act.shape),
            nobs=np.zeros(port.nobs.shape),
            rew=np.zeros(port.rew.shape),
            term=np.zeros((num_episodes, horizon), bool),
            trunc=np.zeros((num_episodes, horizon), bool),
            alive=np.zeros((num_episodes, horizon), bool),
        )
        # which reference steps are mapped with state_to_jax: t = 0 of the first 16 episodes, and 4
        # random steps among the first 64 of each of the first 128 episodes
        wanted: dict[int, set] = {}
        if state_to_jax is not None:
            _rebuild_state(env, _state_template(env, params), 0)  # refuse other wrappers early
            for i in range(min(num_episodes, 128)):
                wanted[i] = set(rng.integers(0, min(horizon, 64), size=4).tolist()) | ({0} if i < 16 else set())
        stochastic = env.unwrapped.traits.chance != "deterministic"
        resamples = RESAMPLES if stochastic else 1
        recorded = []  # [episode, t, core state, action, reference outcomes [(obs_flat, reward, term, trunc)]]

        policy_batch = _batched_policy_fn(pol)
        done = np.zeros(num_episodes, bool)
        act_shape = port.act.shape[2:]
        for t in range(horizon):
            if done.all():
                break
            actions = np.asarray(jax.tree.leaves(policy_batch(key, t, unflatten(cur), num_episodes))[0])
            for i in np.flatnonzero(~done):
                e, a = envs[i], actions[i]
                a_ref = convert_action(a)
                if action_to_reference is not None and not _ref_contains(ref_act_space, a_ref, agents):
                    raise PortMismatch(
                        "action space", f"action_to_reference({a!r}) = {a_ref!r} is not in the reference's {ref_act_space!r}"
                    )
                out = None
                if t in wanted.get(i, ()) and len(recorded) < MAX_STATES:
                    core = state_to_jax(e)
                    outs = [_ref_step(copy.deepcopy(e), a_ref, multi, agents, rng, convert_obs) for _ in range(resamples - 1)]
                    out = _ref_step(e, a_ref, multi, agents, None, convert_obs)
                    recorded.append((i, t, core, a, outs + [out]))
                else:
                    out = _ref_step(e, a_ref, multi, agents, None, convert_obs)
                nobs, reward, term, trunc = out
                ref.obs[i, t] = cur[i]
                ref.act[i, t] = np.asarray(a, np.float64).reshape(act_shape)
                ref.nobs[i, t] = nobs
                ref.rew[i, t] = reward
                ref.term[i, t], ref.trunc[i, t], ref.alive[i, t] = term, trunc, True
                cur[i] = nobs
                done[i] = term or trunc
        return ref, cur, recorded

    cache_key = (reference, state_to_jax, obs_to_jax, action_to_reference, pol, num_episodes, seed, horizon,
                 repr(act_space), repr(obs_space), env.unwrapped.traits.chance)
    cached = _REFERENCE_RUNS.pop(cache_key, None)
    ref, cur, recorded = cached if cached is not None else run_reference()
    _REFERENCE_RUNS[cache_key] = (ref, cur, recorded)
    while len(_REFERENCE_RUNS) > _REFERENCE_CACHE_SIZE:
        _REFERENCE_RUNS.pop(next(iter(_REFERENCE_RUNS)))
    stochastic = env.unwrapped.traits.chance != "deterministic"
    resamples = RESAMPLES if stochastic else 1
    _check_in_space(obs_space, unflatten(np.concatenate([ref.obs0, cur])), lead, obs_to_jax)

    # ---- 2. transitions from the reference's states -------------------------------------------
    statistics: list[Statistic] = []
    if recorded:
        st = _check_states(env, params, recorded, key, resamples, lead, stochastic)
        if st is not None:
            statistics.append(st)

    # ---- 3. statistics ------------------------------------------------------------------------
    # the joint initial observation (categorical when discrete; KS needs one dimension), and each
    # component of a multi-dimensional one
    dims = port.obs0.shape[1]
    if discrete_obs or dims == 1:
        statistics.append(_compare("initial observation", port.obs0, ref.obs0, categorical=True if discrete_obs else None))
    if dims > 1:
        cat = True if discrete_obs else None
        statistics += [
            _compare(f"initial observation[{j}]", port.obs0[:, j], ref.obs0[:, j], categorical=cat) for j in range(dims)
        ]
    statistics.append(_compare("episode length", port.alive.sum(1), ref.alive.sum(1)))
    statistics.append(_compare("outcome (0 terminated, 1 truncated, 2 horizon)", port.outcome(), ref.outcome(), True))
    p_ret, r_ret = port.returns(), ref.returns()
    joint = _compare("return", p_ret, r_ret)
    if joint.test == "chi-square" or p_ret.shape[1] == 1:
        statistics.append(joint)
    else:
        statistics += [_compare(f"return[agent {j}]", p_ret[:, j], r_ret[:, j]) for j in range(p_ret.shape[1])]
    if discrete_obs and discrete_act:
        # alpha / m with the two transition statistics counted: summaries only where they fail
        statistics += _transition_statistics(port, ref, alpha / (len(statistics) + 2))

    threshold = alpha / len(statistics)
    for s in statistics:
        if s.p_value < threshold:
            raise PortMismatch(
                s.name,
                f"{s.test} p={s.p_value:.3g} < alpha/m = {alpha:g}/{len(statistics)}; "
                f"port (n={s.n_port}): {s.port}; reference (n={s.n_reference}): {s.reference}",
            )
    return PortReport(
        env=repr(env),
        num_episodes=num_episodes,
        horizon=horizon,
        alpha=alpha,
        threshold=threshold,
        spaces=tuple(space_notes),
        statistics=tuple(statistics),
        states_checked=len(recorded),
        seconds=time.perf_counter() - t_start,
    )


class _UserPolicy:
    """A user's ``(key, obs) -> action`` as ``(episode_key, step_key, obs) -> action`` (hashable
    by the user's function, so the compiled rollout is reused)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, ek, sk, obs):
        return self.fn(sk, obs)

    def __hash__(self):
        return hash(self.fn)

    def __eq__(self, other):
        return isinstance(other, _UserPolicy) and other.fn is self.fn


@dataclasses.dataclass
class _Side:
    obs0: np.ndarray  # [N, D]
    obs: np.ndarray  # [N, T, D]
    act: np.ndarray  # [N, T, A]
    nobs: np.ndarray  # [N, T, D]
    rew: np.ndarray  # [N, T, agents]
    term: np.ndarray  # [N, T]
    trunc: np.ndarray
    alive: np.ndarray

    def __post_init__(self):
        if self.obs0.ndim == 1:
            self.obs0 = self.obs0[:, None]

    def outcome(self) -> np.ndarray:
        ended = self.alive & (self.term | self.trunc)
        term = np.any(ended & self.term, axis=1)
        trunc = np.any(ended & self.trunc, axis=1)
        return np.where(term, 0, np.where(trunc, 1, 2))

    def returns(self) -> np.ndarray:
        return np.sum(self.rew * self.alive[..., None], axis=1)


def _ref_step(e, a_ref, multi, agents, rng, convert_obs):
    """Step reference ``e`` (reseeded from ``rng`` when given: a copy for resampling)."""
    if rng is not None and hasattr(e, "np_random"):
        e.np_random = np.random.default_rng(int(rng.integers(0, 2**31 - 1)))
    if multi:
        o, rews, terms, truncs, _ = e.step(a_ref)
        reward = np.array([rews.get(a, 0.0) for a in agents], np.float64)
        term, trunc = any(bool(terms.get(a, False)) for a in agents), any(bool(truncs.get(a, False)) for a in agents)
        if all(a in o for a in agents):
            o = convert_obs(o)
        else:
            raise ValueError("verify_port: a ParallelEnv step returned observations for only some agents")
    else:
        o, reward, term, trunc, _ = e.step(a_ref)
        o, reward = convert_obs(o), np.array([float(reward)])
    reward = reward.astype(np.float32).astype(np.float64)  # the port's float32 rewards, summed alike
    return o, reward, bool(term), bool(trunc)


def _ref_contains(space, a_ref, agents) -> bool:
    try:
        if agents and isinstance(a_ref, dict):
            return all(space.contains(a_ref[a]) for a in agents)
        return bool(space.contains(a_ref))
    except Exception:  # noqa: BLE001 -- a malformed action is simply not contained
        return False


def _check_in_space(space, stacked_obs, lead: int, converted):
    """Raise unless every row of ``stacked_obs`` (the reference's initial observations, then its
    last ones) lies in the port's observation ``space``."""
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


def _first_visits(side: _Side):
    """Per stratum (observation, action), the first visit of every episode: the rows of the
    alive steps as (stratum codes, next-obs+terminated codes, reward codes)."""
    n, t = np.nonzero(side.alive)
    obs, act = side.obs[n, t], side.act[n, t]
    key = np.concatenate([n[:, None].astype(np.float64), obs, act], axis=1)
    _, first = np.unique(_codes(key), return_index=True)
    first = np.sort(first)
    strata = _codes(np.concatenate([obs, act], axis=1)[first])
    nxt = np.concatenate([side.nobs[n, t], side.term[n, t, None]], axis=1)[first]
    rew = _quantize(side.rew[n, t][first])
    return strata, nxt, rew


def _transition_statistics(port: _Side, ref: _Side, threshold: float) -> list[Statistic]:
    ps, pn, pr = _first_visits(port)
    rs, rn, rr = _first_visits(ref)
    out = []
    for name, px, rx in (
        ("next observation, terminated | (observation, action)", pn, rn),
        ("reward | (observation, action)", pr, rr),
    ):
        p, k = stats.stratified_test(ps, _codes(px), rs, _codes(rx))
        worst = _worst_stratum(ps, px, rs, rx) if p < threshold else ("", "")
        out.append(Statistic(name, "stratified chi-square", p, len(ps), len(rs), f"{k} strata on both sides{worst[0]}", worst[1]))
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
                f"{_summary_categorical(cb, b)} (n={len(b)})",
            )
    return desc


def _state_template(env, params):
    """Shapes and dtypes of the unwrapped port's state (nothing is computed)."""
    return jax.eval_shape(env.unwrapped.reset, jax.random.key(0), params)[1]


def _check_states(env, params, recorded, key, resamples, lead, stochastic) -> Statistic | None:
    """Step the port from the recorded reference states; raise on a deterministic mismatch,
    return the stratified comparison for a stochastic port."""
    t_leaves, t_def = jax.tree.flatten(_state_template(env, params))
    states = []
    for i, t, core, _, _ in recorded:
        leaves, treedef = jax.tree.flatten(core)
        if treedef != t_def:
            raise ValueError(
                f"state_to_jax returned {treedef}; the unwrapped port's state (env.unwrapped.reset_env) is {t_def}"
            )
        core = jax.tree.unflatten(t_def, [np.asarray(x, tl.dtype) for x, tl in zip(leaves, t_leaves)])
        states.append(_rebuild_state(env, core, t))
    state_batch = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *states)
    actions = np.stack([np.asarray(r[3]) for r in recorded])
    nobs, reward, term, trunc = _compiled("state step", _state_step_fn, env, resamples)(
        params, state_batch, actions, key
    )
    p_obs = _flat(nobs, 2)  # [S, R, D]
    p_rew = np.asarray(reward, np.float64).reshape(len(recorded), resamples, -1)
    p_term, p_trunc = np.asarray(term), np.asarray(trunc)
    strata_p, out_p, strata_r, out_r = [], [], [], []
    for s, (i, t, _, a, outs) in enumerate(recorded):
        r_obs = np.stack([o[0] for o in outs])
        r_rew = np.stack([o[1] for o in outs])
        r_term = np.array([o[2] for o in outs])
        r_trunc = np.array([o[3] for o in outs])
        if not stochastic:
            where = f"reference episode {i} step {t}, action {np.asarray(a).tolist()}"
            for what, pv, rv, exact in (
                ("terminated", p_term[s, 0], r_term[0], True),
                ("truncated", p_trunc[s, 0], r_trunc[0], True),
                ("observation", p_obs[s, 0], r_obs[0], False),
                ("reward", p_rew[s, 0], r_rew[0], False),
            ):
                same = np.array_equal(pv, rv) if exact else np.allclose(pv, rv, rtol=RTOL, atol=ATOL)
                if not same:
                    raise PortMismatch(
                        "transition",
                        f"{what} after {where}: port {np.asarray(pv).tolist()}, reference {np.asarray(rv).tolist()} "
                        f"(1 sample each; floats compared with rtol={RTOL:g}, atol={ATOL:g})",
                    )
            continue
        rows_p = np.concatenate([p_obs[s], p_rew[s], p_term[s, :, None], p_trunc[s, :, None]], axis=1)
        rows_r = np.concatenate([r_obs, r_rew, r_term[:, None], r_trunc[:, None]], axis=1)
        strata_p += [s] * resamples
        strata_r += [s] * len(outs)
        out_p.append(_quantize(rows_p))
        out_r.append(_quantize(rows_r))
    if not stochastic:
        return None
    out_p, out_r = np.concatenate(out_p), np.concatenate(out_r)
    p, k = stats.stratified_test(np.array(strata_p), _codes(out_p), np.array(strata_r), _codes(out_r))
    worst = _worst_stratum(
        _codes(np.array(strata_p, np.float64)[:, None]), out_p, _codes(np.array(strata_r, np.float64)[:, None]), out_r
    )
    return Statistic(
        "step from reference states (obs, reward, flags)",
        "stratified chi-square",
        p,
        len(strata_p),
        len(strata_r),
        f"{k} states, {resamples} samples each{worst[0]}",
        worst[1],
    )
