"""The runs of `verify_port`: constants, the default policy, the port's compiled programs
(rollouts, resets, steps from given states, replays) and the helpers that flatten, code and
summarise what they return."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import _backend, spaces
from jaxenvs._fast_compile import compiler_options as _compiler_options
from jaxenvs._fast_compile import fast_jit as _fast_jit
from jaxenvs.wrappers.base import (
    TimeLimit,
    TimeLimitState,
    WithParams,
    Wrapper,
)

ALPHA = 1e-3  # probability that a faithful port fails


DETECT = 0.02  # the effect (total variation / KS distance) a pass must be able to detect ...


POWER = 0.95  # ... with this probability


PORT_CHUNK = 4096  # port episodes per compiled call (one shape serves every round)
MAX_EPISODES = 1 << 20  # episodes each side may be run for (adaptive sampling, within the budget)


BUDGET_S = 60.0  # CPU seconds of this process a call may spend drawing episodes (see `Budget`)


WALL_FACTOR = 3.0  # ... and it stops drawing at this many times the budget in wall-clock seconds not spent waiting
# for a CPU too (a reference that sleeps)


MAX_DRAWS = 1 << 20  # port draws per (observation, action), and initial observations per side


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


DEFAULT_POLICIES: dict = {}  # by action space: one compiled policy serves every port of that space


CONTAINS: dict = {}  # compiled space.contains by (space, agent axes)


def _runqueue_wait_s(tid: int) -> float:
    """Seconds thread `tid` of this process has waited, runnable, for a CPU (Linux's
    /proc/self/task/TID/schedstat, second field, nanoseconds); 0.0 where it cannot be read."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[1]) * 1e-9
    except (OSError, IndexError, ValueError):
        return 0.0


def idle_wall_clock() -> float:
    """Wall-clock seconds less the time the calling thread waited for a CPU: the wall time a run
    would have taken on an idle machine, its waits (sleeps, sockets, subprocesses) included.
    Plain wall-clock time where the kernel does not say (not Linux)."""
    return time.perf_counter() - _runqueue_wait_s(threading.get_native_id())


CHECK_EVERY_S = 0.02  # `Budget.spent` reads its clocks at most this often
cpu_clock = time.process_time  # the budget's clock: this process's CPU seconds, all threads
wall_clock = idle_wall_clock  # the guard's


class Budget:
    """The work a `verify_port` call may spend drawing episodes: `seconds` of this process's CPU
    time (`cpu_clock`, `time.process_time`: every thread of this process, in user and system
    mode, and nothing of the other processes that share the machine), counted from the call's
    start. A busy machine inflates wall-clock seconds several times but CPU seconds little, so
    one call on one port draws about as many episodes, and reaches the same verdict, on a quiet
    machine and on a loaded one. A reference that waits instead of computing (sleeps, blocks on
    a socket or a subprocess) costs no CPU time, so the draws also stop once `WALL_FACTOR *
    seconds` of `wall_clock` have passed: wall-clock time less the time this thread waited for a
    CPU (Linux; plain wall-clock time elsewhere), so that the guard, too, does not come sooner
    on a busy machine."""

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self.cpu0, self.wall0, self.t0 = cpu_clock(), wall_clock(), time.perf_counter()
        self.stopped: str | None = None  # why the draws were cut short (a round ended early), else None
        self._spent, self._checked = False, float("-inf")

    def used(self) -> float:
        """CPU seconds spent since the call started."""
        return cpu_clock() - self.cpu0

    def wall(self) -> float:
        """The guard's seconds (`wall_clock`) since the call started."""
        return wall_clock() - self.wall0

    def left(self) -> float:
        """CPU seconds left (<= 0: spent)."""
        return self.seconds - self.used()

    def spent(self) -> bool:
        """Whether the CPU budget or the guard has run out (the clocks read at most every
        `CHECK_EVERY_S` seconds: reading a many-threaded process's CPU time takes milliseconds on
        a loaded machine)."""
        now = time.perf_counter()
        if not self._spent and now - self._checked >= CHECK_EVERY_S:
            self._checked = now
            self._spent = self.left() <= 0 or self.wall() >= WALL_FACTOR * self.seconds
        return self._spent

    def describe(self) -> str:
        return (f"{self.seconds:g} CPU s of this process (used {self.used():.1f} CPU s in "
                f"{time.perf_counter() - self.t0:.1f} s of wall time, {self.wall():.1f} s of it not waiting for a CPU; "
                f"the guard stops at {WALL_FACTOR * self.seconds:g} s of those)")


def time_limit(env) -> int | None:
    while isinstance(env, Wrapper):
        if isinstance(env, TimeLimit):
            return env.max_episode_steps
        env = env.env
    return None


def rebuild_state(env, core_state, t: int):
    """The state of the (AutoReset-free) wrapper chain `env` around `core_state` after `t` steps."""
    if not isinstance(env, Wrapper):
        return core_state
    inner = rebuild_state(env.env, core_state, t)
    if isinstance(env, TimeLimit):
        return TimeLimitState(inner, np.int32(t))
    if type(env).inner_state is Wrapper.inner_state:
        return inner  # a wrapper without state of its own
    raise ValueError(
        f"verify_port cannot rebuild the state of wrapper {type(env).__name__} from a reference state; "
        "with state_to_jax only TimeLimit and wrappers without state of their own are supported"
    )


def flat(tree, batch: int) -> np.ndarray:
    """float64[*batch_shape, D]: the leaves of `tree` flattened after `batch` leading axes."""
    leaves = [np.asarray(x) for x in jax.tree.leaves(tree)]
    shape = leaves[0].shape[:batch]
    return np.concatenate([x.reshape(shape + (-1,)).astype(np.float64) for x in leaves], axis=-1)


def codes(rows: np.ndarray) -> np.ndarray:
    """One hashable code (a void scalar) per row of a 2-d array."""
    rows = np.ascontiguousarray(rows, np.float64) + 0.0  # -0.0 -> 0.0
    return rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1])))[:, 0]


def quantize(x: np.ndarray) -> np.ndarray:
    """Floats as float32 rounded to 5 significant digits: float32 sums against float64 ones."""
    x = np.asarray(x, np.float32).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mag = np.where(x == 0, 1.0, 10.0 ** np.floor(np.log10(np.abs(np.where(x == 0, 1.0, x)))))
    return np.round(x / mag, 4) * mag


def fmt_row(row) -> str:
    vals = [f"{v:g}" for v in np.asarray(row).ravel()]
    return vals[0] if len(vals) == 1 else "(" + ", ".join(vals) + ")"


def summary_categorical(codes: np.ndarray, rows: np.ndarray) -> str:
    if len(codes) == 0:
        return "no samples"
    uniq, idx, counts = np.unique(codes, return_index=True, return_counts=True)
    order = np.argsort(-counts)[:4]
    parts = [f"{fmt_row(rows[idx[i]])}: {counts[i] / len(codes):.3f}" for i in order]
    more = f", ... ({len(uniq)} values)" if len(uniq) > 4 else ""
    return "{" + ", ".join(parts) + more + "}"


def summary_real(x: np.ndarray) -> str:
    if len(x) == 0:
        return "no samples"
    q = np.quantile(x, [0.1, 0.5, 0.9])
    return f"mean {np.mean(x):.4g}, sd {np.std(x):.3g}, 10/50/90% {q[0]:.4g}/{q[1]:.4g}/{q[2]:.4g}"


def is_parallel_env(ref) -> bool:
    try:
        import gymnasium

        if isinstance(ref, gymnasium.Env):
            return False
    except ImportError:
        pass
    return hasattr(ref, "possible_agents")


def same_space(a: spaces.Space, b: spaces.Space) -> bool:
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
        return a.spaces.keys() == b.spaces.keys() and all(same_space(a.spaces[k], b.spaces[k]) for k in a.spaces)
    if isinstance(a, spaces.Tuple):
        return len(a.spaces) == len(b.spaces) and all(map(same_space, a.spaces, b.spaces))
    return repr(a) == repr(b)


def to_python(a: np.ndarray):
    a = np.asarray(a)
    if a.ndim == 0:
        return int(a) if a.dtype.kind in "iub" else a
    return a


def ref_contains(space, a_ref, agents) -> bool:
    try:
        if agents and isinstance(a_ref, dict):
            return all(space.contains(a_ref[a]) for a in agents)
        return bool(space.contains(a_ref))
    except Exception:  # noqa: BLE001 -- a malformed action is simply not contained
        return False


def default_policy(space: spaces.Space, num_agents: int, multi: bool):
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


class UserPolicy:
    """A user's `(key, obs) -> action` as `(episode_key, step_key, obs) -> action` (hashable by
    the user's function, so the compiled rollout is reused)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, ek, sk, obs):
        return self.fn(sk, obs)

    def __hash__(self):
        return hash(self.fn)

    def __eq__(self, other):
        return isinstance(other, UserPolicy) and other.fn is self.fn


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


def compiled(what, build, env, *args):
    key = (what, _env_key(env)) + args
    fn = _COMPILED.get(key)
    if fn is None:
        if len(_COMPILED) >= 64:
            _COMPILED.pop(next(iter(_COMPILED)))
        fn = _COMPILED[key] = build(env, *args)
    return fn


def _fast_jit_static(fn, *static):
    return jax.jit(fn, static_argnums=static, compiler_options=_compiler_options(jax.default_backend()))


def port_rollout_fn(env, policy, horizon: int, with_states: bool):
    """Jitted `run(params, seed_key, start, num)`: episodes `start .. start + num - 1` (vmapped)
    of at most `horizon` steps; a while loop that stops once every episode has ended (off a CPU:
    `horizon` steps, `jaxenvs._backend.bounded_while`), writing
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
        t, _, _, _, buffers = _backend.bounded_while(cond, body, init, horizon)
        alive = jnp.arange(horizon) < t
        return obs0, buffers + (alive,)

    def run(params, seed_key, start, num: int):
        return jax.vmap(episode, in_axes=(None, None, 0))(params, seed_key, start + jnp.arange(num))

    return _fast_jit_static(run, 3)


def port_reset_fn(env):
    """Jitted: the initial observations of episodes `start .. start + num - 1`."""

    def run(params, seed_key, start, num: int):
        def one(index):
            return env.reset(_episode_keys(seed_key, index)[0], params)[0]

        return jax.vmap(one)(start + jnp.arange(num))

    return _fast_jit_static(run, 3)


def _actions_at(policy, seed_key, t, obs, start, num: int):
    """The actions of episodes `start .. start + num - 1` at step `t` (the port's own keys)."""

    def one(index, o):
        _, _, ep_key, policy_key = _episode_keys(seed_key, index)
        return policy(ep_key, jax.random.fold_in(policy_key, t), o)

    return jax.vmap(one)(start + jnp.arange(num), obs)


@functools.lru_cache(maxsize=32)
def batched_policy_fn(policy):
    """Jitted `act(seed_key, t, obs, start, num)`: the reference episodes' actions at step `t`."""
    return _fast_jit_static(functools.partial(_actions_at, policy), 4)


@functools.lru_cache(maxsize=32)
def policy_block_fn(policy):
    """Jitted `act(seed_key, t0, obs, start, num, steps)`: the actions of steps `t0 .. t0 + steps
    - 1` in one call, for a policy that does not read the observation (the default policy without
    an action mask): the values `batched_policy_fn` gives step by step, a call per `steps` steps."""

    def block(seed_key, t0, obs, start, num: int, steps: int):
        return jax.vmap(lambda t: _actions_at(policy, seed_key, t, obs, start, num))(t0 + jnp.arange(steps))

    return _fast_jit_static(block, 4, 5)


def state_step_fn(env, samples: int):
    """Jitted: each of a batch of states stepped `samples` times with its action."""

    def one(params, state, action, key):
        keys = jax.random.split(key, samples)
        nobs, _, reward, term, trunc, _ = jax.vmap(lambda k: env.step(k, state, action, params))(keys)
        return nobs, reward, term, trunc

    def run(params, states, actions, keys):
        return jax.vmap(one, in_axes=(None, 0, 0, 0))(params, states, actions, keys)

    return _fast_jit(run)


def replay_fn(env, horizon: int):
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
