"""Conformance checker for functional environments: ``check_env(env)``.

Runs an environment the way learners do (``jit``, ``vmap``, ``lax.scan``) and checks the contract
of `jaxenvs.core` (after Stable-Baselines3's ``check_env``, Jumanji's smoke checks and Pgx's
``api_test``). Every violation raises `EnvCheckError`, whose message starts with a stable
rule id and names the offending leaf (paths as `jax.tree_util.keystr` writes them, rooted at
``obs``, ``state``, ``reward``, ``terminated``, ``truncated``, ``info``, ``action``)::

    [dtype-stable] state.t: int32 after reset but float32 after step; ...

The rules, in the order they are checked, are the `Rule` declarations of `RULEBOOK`, the one list
that this docstring (at its end), `jaxenvs check --list-rules` and the documentation's rule table
read: each says what it checks, which environments it applies to, whether it may be skipped and
the phase that checks it.

The rollouts of a ``full_action_set`` env take uniformly random legal actions (from
``obs["action_mask"]``); the others uniformly random actions of the action space.

An environment made with ``checked=True`` only runs under `jaxenvs.checked`; check it without.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, Callable, Iterable

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import DictKey, SequenceKey, keystr, tree_flatten_with_path

from jaxenvs import spaces
from jaxenvs.core import ActionError, Environment, Traits, check_key, is_prng_key

__all__ = ["check_env", "EnvCheckError", "CheckReport", "Rule", "RULEBOOK", "RULES"]


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rule of the contract, declared once in `RULEBOOK`.

    ``id`` is the stable id an `EnvCheckError` carries, ``text`` what the rule checks (the words
    of ``jaxenvs check --list-rules``, of this module's docstring and of the docs' rule table),
    ``applies_to`` the environments it concerns (a predicate of their `Traits`), ``skippable``
    whether ``check_env(skip=...)`` may leave it out (its failure leaves the rest of the check
    meaningful), and ``phases`` the `_Checker` methods that check it (of `PHASES`). `check_env`
    runs each phase once, in the order of `PHASES`, when one of its rules applies.
    """

    id: str
    text: str
    phases: tuple[str, ...]
    applies_to: Callable[[Traits], bool] = lambda traits: True
    skippable: bool = False


def _masked(t: Traits) -> bool:
    return t.action_style == "full_action_set"


def _sequential(t: Traits) -> bool:
    return t.dynamics == "sequential"


_STATIC, _SINGLE, _VMAP, _ROLLOUT, _TURNS = ("check_static",), ("check_single",), ("check_vmap",), ("check_rollout",), ("check_turn_based",)

# THE list of rules, in the order they are checked: adding a rule is one entry here and its check
# in the phase it names. The module docstring, `jaxenvs check --list-rules` and the docs
# (docs/gen_assets.py) all read it.
RULEBOOK: dict[str, Rule] = {rule.id: rule for rule in (
    Rule("traits", "env.traits is a jaxenvs.Traits; num_agents/agents agree", _STATIC),
    Rule("spaces", "observation_space/action_space return jaxenvs.spaces.Space objects", _STATIC),
    Rule("params", "env.validate_params(params) accepts the params under test", _STATIC),
    Rule("action-shape", "batched_action_shape is (num_agents, *space.shape) (no agent axis if single)", _STATIC),
    Rule(
        "traits-implemented",
        "the traits tell the truth: action_style='full_action_set' iff the env defines legal_action_mask, "
        "dynamics='sequential' iff it defines current_player, chance='explicit_stochastic' iff it defines "
        "is_chance_node, chance_outcomes and apply_chance (a mask needs a Discrete action space)",
        ("check_turn_traits",),
    ),
    Rule("jit", "reset/step trace and run under jax.jit", _SINGLE + _ROLLOUT),
    Rule(
        "no-leaked-tracer",
        "reset/step store no traced value on the environment object (they are pure: everything that "
        "changes goes into the returned state)",
        _SINGLE,
    ),
    Rule("reset-structure", "reset returns (obs, state)", _SINGLE),
    Rule("step-structure", "step returns (obs, state, reward, terminated, truncated, info)", _SINGLE),
    Rule("action-sample", "a sample of the action space lies in it and step accepts it", _SINGLE),
    Rule("obs-structure", "the observation's pytree matches the observation space (Dict keys, Tuple lengths)", _SINGLE + _ROLLOUT),
    Rule("obs-dtype", "observation leaves are float32, int32 or uint8, and have their space's dtype", _SINGLE + _ROLLOUT),
    Rule("obs-shape", "observation leaves have the space's shape (after a leading agent axis if multi-agent)", _SINGLE + _ROLLOUT),
    Rule(
        "obs-in-space", 'observations (reset, step, info["final_obs"]) lie in the observation space', _SINGLE + _ROLLOUT,
        skippable=True,
    ),
    Rule("structure-stable", "obs and state have the same pytree structure after reset and after step", _SINGLE),
    Rule("shape-stable", "obs and state have the same leaf shapes after reset and after step", _SINGLE),
    Rule(
        "dtype-stable",
        "obs and state have the same leaf dtypes after reset and after step (a lax.scan carry must type-check)",
        _SINGLE,
    ),
    Rule("reward-dtype", "reward is float32", _SINGLE),
    Rule("reward-shape", "reward is a scalar, or float32[num_agents] for multi-agent environments", _SINGLE),
    Rule("flag-dtype", "terminated/truncated are bool", _SINGLE),
    Rule("flag-shape", "terminated/truncated are scalars (episode-level, also for multi-agent)", _SINGLE),
    Rule("info-structure", "info is a flat dict of arrays with string keys (final_obs may be an obs tree)", _SINGLE),
    Rule("retrace", "repeated jit calls of reset/step trace once (no weak-type or static drift)", _SINGLE, skippable=True),
    Rule("vmap", "reset/step run under jax.vmap over a batch of keys", _VMAP + _ROLLOUT),
    Rule("params-vmap", "reset/step run under jax.vmap over a batch of params", _VMAP, skippable=True),
    Rule("scan", "a lax.scan rollout of step runs", _ROLLOUT),
    Rule(
        "no-callbacks", "the compiled rollout contains no host callbacks (pure_callback, jax.debug...)", _ROLLOUT,
        skippable=True,
    ),
    Rule("info-stable", "info keys, shapes and dtypes never change (across calls, traces, params)", _SINGLE + _ROLLOUT),
    Rule("reward-finite", "rewards are finite along the rollout", _ROLLOUT, skippable=True),
    Rule("deterministic", "the same keys give the same trajectory (across runs and separate compilations)", _ROLLOUT),
    Rule(
        "key-sensitivity", "for traits.chance == 'stochastic': another step key changes the trajectory", _ROLLOUT,
        applies_to=lambda t: t.chance == "stochastic", skippable=True,
    ),
    Rule(
        "step-ignores-key",
        "for traits.chance == 'deterministic': the base env's step gives the same result for any key "
        "(AutoReset and VectorEnv rely on it to skip a key split per step)",
        ("check_step_ignores_key",),
        applies_to=lambda t: t.chance == "deterministic",
    ),
    Rule(
        "mask-structure",
        "legal_action_mask is bool[n] (bool[num_agents, n]); the observation is a dict with 'observation' "
        "and 'action_mask' (uint8), equal to the returned state's mask after reset and after every step",
        _SINGLE + _ROLLOUT,
        applies_to=_masked,
    ),
    Rule(
        "mask-autoreset",
        "after an auto-reset `obs['action_mask']` is the new game's mask, and `info['final_obs']['action_mask']` "
        "the ended game's",
        _ROLLOUT,
        applies_to=_masked,
    ),
    Rule(
        "current-player", "current_player is an int32 scalar in [0, num_agents) in every visited state", _TURNS,
        applies_to=_sequential,
    ),
    Rule(
        "mask-mover",
        "the mover's row has a legal action at every non-terminal decision state, the other rows are zero "
        "(sequential), every row is zero at a chance node",
        _TURNS,
        applies_to=_masked,
    ),
    Rule(
        "mask-step",
        "for 256 visited states and every action: info['illegal_action'] (a bool on every step) is true "
        "exactly when the mask says the action is illegal",
        _TURNS,
        applies_to=_masked,
    ),
    Rule(
        "non-mover-ignored", "in a sequential game the non-movers' actions change nothing", _TURNS,
        applies_to=lambda t: _sequential(t) and t.num_agents > 1,
    ),
    Rule(
        "chance-outcomes",
        "at chance nodes chance_outcomes is float32[K] >= 0 summing to 1, step's draws "
        "(info['chance_outcome']) follow it (chi-square) and apply_chance of the drawn outcome gives "
        "step's state",
        _TURNS,
        applies_to=lambda t: t.chance == "explicit_stochastic",
    ),
    Rule(
        "apply-chance",
        "apply_chance, called eagerly, accepts every outcome of probability > 0 at a visited chance node and "
        "raises a ValueError on an outcome of probability 0, one out of range and at a decision state",
        _TURNS,
        applies_to=lambda t: t.chance == "explicit_stochastic",
    ),
)}
RULES = tuple(RULEBOOK)  # the rule ids, in order
# the `_Checker` methods that check the rules, in the order they run (each reads what the ones
# before it found: the traits and spaces, the single-env steps, the rollout)
PHASES = ("check_static", "check_turn_traits", "check_single", "check_vmap", "check_rollout",
          "check_step_ignores_key", "check_turn_based")
assert {phase for rule in RULEBOOK.values() for phase in rule.phases} == set(PHASES)


def rules_table() -> str:
    """The rules as an indented text table (rule id, then what it checks)."""
    width = max(map(len, RULEBOOK))
    return "\n".join(f"    {rule.id:<{width}}  {rule.text}" for rule in RULEBOOK.values())


__doc__ = (__doc__ or "") + "\nThe rules:\n\n" + rules_table() + "\n"

MASK_STEP_STATES = 256  # visited states whose every action mask-step tries
CHANCE_DRAWS = 4000  # step's draws at one chance node for the chi-square test of chance-outcomes
CHANCE_LEVEL = 1e-4  # significance level of that test

OBS_DTYPES = ("float32", "int32", "uint8")
CALLBACK_PRIMITIVES = ("pure_callback", "io_callback", "callback", "debug_callback", "debug_print")
_PYTHON_LOOP_STEPS = 3  # single-env jitted steps compared against the scanned rollout
# the checked programs run for microseconds: compile them with XLA's cheapest backend passes
_FAST_COMPILE = {"xla_backend_optimization_level": 0}


class EnvCheckError(AssertionError):
    """A violated rule of the environment contract.

    ``rule`` is the stable rule id (one of `RULES`), ``path`` the offending leaf ("" when
    the rule concerns no single leaf). ``str(err)`` is ``"[rule] path: message"``.
    """

    def __init__(self, rule: str, message: str, path: str = ""):
        self.rule = rule
        self.path = path
        super().__init__(f"[{rule}] {path}: {message}" if path else f"[{rule}] {message}")


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """What `check_env` ran: the rules it checked and what the random rollout saw."""

    env: str
    num_envs: int
    num_steps: int
    rules: tuple[str, ...]
    skipped: tuple[str, ...]
    terminated: int  # number of (env, step) transitions with terminated=True in the rollout
    truncated: int  # ... with truncated=True


def check_env(
    env,
    params: Any = None,
    *,
    key: jax.Array | None = None,
    num_steps: int = 100,
    num_envs: int = 8,
    skip: Iterable[str] = (),
) -> CheckReport:
    """Check that ``env`` keeps the jaxenvs environment contract; raise `EnvCheckError` if not.

    ``params`` defaults to ``env.default_params``; ``key`` (typed ``jax.random.key`` or raw
    ``PRNGKey``) to ``jax.random.key(0)``. A rollout of ``num_envs`` environments (vmapped) takes
    ``num_steps`` uniformly random actions inside one ``lax.scan``; raise both for environments
    whose randomness or failures are rare. ``skip`` names skippable rules (`Rule.skippable`) to
    leave out. Takes about a second for a small environment (most of it compiling).

    The contract is about compiled programs (``jit``, ``retrace``, ``no-callbacks``), so the check
    runs with jit enabled even under `jax.disable_jit` or `JAX_DISABLE_JIT=1`.
    """
    if key is not None:
        check_key(key, "check_env")
    skip = tuple(skip)
    bad = [r for r in skip if r not in RULEBOOK or not RULEBOOK[r].skippable]
    if bad:
        skippable = [r.id for r in RULEBOOK.values() if r.skippable]
        raise ValueError(f"check_env cannot skip {bad}; skippable rules: {skippable}")
    for name, v, lo in (("num_steps", num_steps, _PYTHON_LOOP_STEPS), ("num_envs", num_envs, 1)):
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise ValueError(f"check_env needs {name} as an int >= {lo}, got {v!r}")
    with jax.disable_jit(False):  # under disable_jit every call would trace and nothing compile
        return _Checker(env, params, key, num_steps, num_envs, skip).run()


# ---------------------------------------------------------------------------------------------
# pytree helpers
# ---------------------------------------------------------------------------------------------


def _leaves(tree, root: str) -> list[tuple[str, Any]]:
    return [(root + keystr(p), x) for p, x in tree_flatten_with_path(tree)[0]]


def _host(x) -> np.ndarray:
    return np.asarray(jax.random.key_data(x) if is_prng_key(x) else x)


# jax.typeof is jax >= 0.4.37's name for the abstract value; jax.core.get_aval before
_typeof = getattr(jax, "typeof", None) or jax.core.get_aval


def _aval(x) -> tuple[tuple[int, ...], str, bool]:
    t = _typeof(x)
    return tuple(t.shape), str(t.dtype), bool(getattr(t, "weak_type", False))


def _structure_difference(a, b, root: str) -> str:
    """Where pytrees ``a`` and ``b`` (with different treedefs) differ, as a path."""
    pa = dict(_leaves(a, root))
    pb = dict(_leaves(b, root))
    missing, extra = [p for p in pa if p not in pb], [p for p in pb if p not in pa]
    if missing:
        return missing[0]
    if extra:
        return extra[0]
    return _static_difference(a, b, root) or root


def _static_difference(a, b, path: str) -> str | None:
    """Path of the first differing node type or static (non-pytree) dataclass field."""
    if type(a) is not type(b):
        return path
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            va, vb = getattr(a, f.name), getattr(b, f.name)
            if f.metadata.get("static", False) or not f.metadata.get("pytree_node", True):
                try:
                    same = bool(va == vb)
                except Exception:
                    same = va is vb
                if not same:
                    return f"{path}.{f.name}"
            else:
                found = _static_difference(va, vb, f"{path}.{f.name}")
                if found:
                    return found
    elif isinstance(a, Mapping):
        for k in a:
            if k in b:
                found = _static_difference(a[k], b[k], path + keystr((DictKey(k),)))
                if found:
                    return found
    elif isinstance(a, (tuple, list)):
        for i, (x, y) in enumerate(zip(a, b)):
            found = _static_difference(x, y, path + keystr((SequenceKey(i),)))
            if found:
                return found
    return None


def _index_label(flat_index: int, lead_shape: tuple[int, ...], names: tuple[str, ...]) -> str:
    idx = np.unravel_index(flat_index, lead_shape) if lead_shape else ()
    return ", ".join(f"{n} {int(i)}" for n, i in zip(names, idx))


def _first_difference(a: dict, b: dict, exact: bool) -> tuple[str, int] | None:
    """(path, flat index) of the first leaf element where the named trees ``a`` and ``b`` differ.

    Floats compare with ``rtol=1e-5, atol=1e-6`` unless ``exact`` (separately compiled programs
    may round differently); everything else exactly.
    """
    for root in a:
        for (path, x), (_, y) in zip(_leaves(a[root], root), _leaves(b[root], root)):
            x, y = _host(x), _host(y)
            if x.dtype.kind == "f" and not exact:
                same = np.isclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True)
            elif x.dtype.kind == "f":
                same = (x == y) | (np.isnan(x) & np.isnan(y))
            else:
                same = x == y
            same = np.broadcast_to(same, x.shape)
            if not same.all():
                return path, int(np.argmin(same.reshape(-1)))
    return None


def _callback_primitives(jaxpr) -> list[str]:
    found = []
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in CALLBACK_PRIMITIVES or name.endswith("_callback"):
            found.append(name)
        for v in eqn.params.values():
            for sub in v if isinstance(v, (tuple, list)) else (v,):
                if hasattr(sub, "eqns") or hasattr(getattr(sub, "jaxpr", None), "eqns"):
                    found += _callback_primitives(sub)
    return found


def _space_leaves(space, obs, path: tuple = ()):
    """Yield ``(path, leaf_space, obs_subtree)``, descending into Dict and Tuple spaces."""
    if isinstance(space, spaces.Dict):
        if not isinstance(obs, Mapping) or set(obs) != set(space.spaces):
            got = sorted(obs) if isinstance(obs, Mapping) else type(obs).__name__
            raise EnvCheckError(
                "obs-structure", f"observation has {got}, the space has keys {sorted(space.spaces)}", "obs" + keystr(path)
            )
        for k, s in space.spaces.items():
            yield from _space_leaves(s, obs[k], path + (DictKey(k),))
    elif isinstance(space, spaces.Tuple):
        if not isinstance(obs, (tuple, list)) or len(obs) != len(space.spaces):
            raise EnvCheckError(
                "obs-structure",
                f"observation is {type(obs).__name__} of length {len(obs) if isinstance(obs, (tuple, list)) else '-'}, "
                f"the space is a Tuple of {len(space.spaces)}",
                "obs" + keystr(path),
            )
        for i, s in enumerate(space.spaces):
            yield from _space_leaves(s, obs[i], path + (SequenceKey(i),))
    else:
        yield path, space, obs


def _contains_each(space, x, n_lead: int) -> np.ndarray:
    """bool[prod(lead)]: ``space.contains`` of every element of ``x`` (``n_lead`` leading axes)."""
    flat = jax.tree.map(lambda a: jnp.reshape(a, (-1,) + tuple(a.shape[n_lead:])), x)
    return np.asarray(jax.vmap(space.contains)(flat)).reshape(-1)


@functools.lru_cache(maxsize=None)
def _compiler_options(backend: str) -> dict | None:
    try:
        jax.jit(lambda x: x + 1, compiler_options=_FAST_COMPILE)(jnp.int32(0))
        return _FAST_COMPILE
    except Exception:
        return None


def _jit(fn):
    return jax.jit(fn, compiler_options=_compiler_options(jax.default_backend()))


def _first_leaf(x):
    return jax.tree.leaves(x)[0]


# ---------------------------------------------------------------------------------------------
# the checker
# ---------------------------------------------------------------------------------------------


class _Checker:
    def __init__(self, env, params, key, num_steps, num_envs, skip):
        self.env = env
        self.params = params
        self.key = jax.random.key(0) if key is None else key
        self.T = num_steps
        self.B = num_envs
        self.skip = skip
        self.name = getattr(env, "name", type(env).__name__)

    # -- small helpers ------------------------------------------------------------------------
    def call(self, rule: str, what: str, fn, *args):
        try:
            return fn(*args)
        except EnvCheckError:
            raise
        except ActionError as e:
            raise EnvCheckError("action-sample", f"{what} rejected an action sampled from {self.act_space}: {e}") from e
        except jax.errors.UnexpectedTracerError as e:
            self.check_no_leaked_tracer()
            raise EnvCheckError("no-leaked-tracer", f"{what} used a tracer leaked from an earlier trace: {e}") from e
        except Exception as e:
            raise EnvCheckError(rule, f"{what} raised {type(e).__name__}: {e}") from e

    def check_no_leaked_tracer(self):
        """Raise unless no attribute of the environment (or of any wrapper in its chain) holds a
        JAX tracer, as a ``step`` that saves its traced state on ``self`` leaves behind."""
        env, seen = self.env, set()
        while env is not None and id(env) not in seen:
            seen.add(id(env))
            for name, value in getattr(env, "__dict__", {}).items():
                try:
                    leaves = jax.tree.leaves(value)
                except Exception:  # not a pytree: nothing of JAX's inside
                    continue
                if any(isinstance(x, jax.core.Tracer) for x in leaves):
                    raise EnvCheckError(
                        "no-leaked-tracer",
                        f"after jax.jit(env.step), attribute {name!r} of {type(env).__name__} holds a traced value: "
                        "reset/step must be pure (return what changes in the state, store nothing on self)",
                        f"{type(env).__name__}.{name}",
                    )
            env = env.__dict__.get("env") if hasattr(env, "__dict__") else None

    # -- static checks ------------------------------------------------------------------------
    def check_static(self):
        env = self.env
        traits = getattr(env, "traits", None)
        if not isinstance(traits, Traits):
            raise EnvCheckError("traits", f"env.traits is {type(traits).__name__}, expected a jaxenvs.Traits instance")
        n = getattr(env, "num_agents", traits.num_agents)
        if n != traits.num_agents:
            raise EnvCheckError("traits", f"env.num_agents={n!r} but traits.num_agents={traits.num_agents}")
        agents = tuple(getattr(env, "agents", tuple(str(i) for i in range(n))))
        if len(agents) != n or len(set(agents)) != n or not all(isinstance(a, str) for a in agents):
            raise EnvCheckError("traits", f"env.agents={agents!r} must be {n} distinct strings (num_agents={n})")
        self.traits, self.num_agents = traits, n
        self.agent_lead = (n,) if n > 1 else ()

        if self.params is None:
            self.params = env.default_params
        validate = getattr(env, "validate_params", None)
        if validate is not None:
            try:
                validate(self.params)
            except Exception as e:
                raise EnvCheckError("params", f"validate_params rejected the params under test: {e}") from e

        for attr in ("observation_space", "action_space"):
            try:
                space = getattr(env, attr)(self.params)
            except Exception as e:
                raise EnvCheckError("spaces", f"env.{attr}(params) raised {type(e).__name__}: {e}") from e
            if not isinstance(space, spaces.Space):
                raise EnvCheckError("spaces", f"env.{attr}(params) returned {type(space).__name__}, not a jaxenvs Space")
        self.obs_space = env.observation_space(self.params)
        self.act_space = env.action_space(self.params)

        shape_fn = getattr(env, "batched_action_shape", None)
        if shape_fn is not None and self.act_space.shape is not None:
            want = self.agent_lead + tuple(self.act_space.shape)
            got = tuple(shape_fn(self.params))
            if got != want:
                raise EnvCheckError(
                    "action-shape",
                    f"batched_action_shape is {got}, expected {want} for {n} agent(s) of {self.act_space}",
                    "action",
                )

    # -- observation checks ---------------------------------------------------------------------
    def check_obs(self, obs, n_batch: int, where: str, names: tuple[str, ...], root: str = "obs"):
        """Dtype, shape and containment of ``obs`` with ``n_batch`` leading batch axes."""
        n_lead = n_batch + len(self.agent_lead)
        for path, space, sub in _space_leaves(self.obs_space, obs):
            label = root + keystr(path)
            for leaf_path, leaf in _leaves(sub, label):
                dt = str(jnp.result_type(leaf))
                if dt not in OBS_DTYPES:
                    raise EnvCheckError("obs-dtype", f"{dt} {where}; observations are {'/'.join(OBS_DTYPES)}", leaf_path)
            if space.shape is not None:
                if not isinstance(sub, jax.Array):
                    raise EnvCheckError("obs-structure", f"{type(sub).__name__} {where}, but its space is {space}", label)
                leaf = sub
                if space.dtype is not None and str(jnp.result_type(leaf)) != np.dtype(space.dtype).name:
                    raise EnvCheckError(
                        "obs-dtype",
                        f"{jnp.result_type(leaf)} {where} but its space {space} has {np.dtype(space.dtype).name}",
                        label,
                    )
                want = tuple(self.agent_lead) + tuple(space.shape)
                got = tuple(jnp.shape(leaf))[n_batch:]
                if got != want:
                    extra = f" (leading axis of {self.num_agents} agents)" if self.agent_lead else ""
                    raise EnvCheckError("obs-shape", f"shape {got} {where}, expected {want}{extra} for {space}", label)
            if self.applies("obs-in-space"):
                lead_shape = tuple(jnp.shape(_first_leaf(sub)))[:n_lead]
                ok = _contains_each(space, sub, n_lead)
                if not ok.all():
                    i = int(np.argmin(ok))
                    at = _index_label(i, lead_shape, names + ("agent",))
                    value = jax.tree.map(lambda a: np.asarray(a).reshape((-1,) + a.shape[n_lead:])[i], sub)
                    raise EnvCheckError(
                        "obs-in-space", f"{value} {where}{' (' + at + ')' if at else ''} is not in {space}", label
                    )

    # -- reset/step output checks ---------------------------------------------------------------
    def check_reset_output(self, out):
        if not (isinstance(out, tuple) and len(out) == 2):
            got = f"a {type(out).__name__}" + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else "")
            raise EnvCheckError("reset-structure", f"reset returned {got}; expected the tuple (obs, state)")
        return out

    def check_step_output(self, out, obs0, state0):
        if not (isinstance(out, tuple) and len(out) == 6):
            got = f"a {type(out).__name__}" + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else "")
            raise EnvCheckError(
                "step-structure", f"step returned {got}; expected (obs, state, reward, terminated, truncated, info)"
            )
        obs, state, reward, terminated, truncated, info = out
        for root, a, b in (("obs", obs0, obs), ("state", state0, state)):
            if jax.tree.structure(a) != jax.tree.structure(b):
                path = _structure_difference(a, b, root)
                raise EnvCheckError(
                    "structure-stable",
                    f"pytree structure differs between reset and step:\n  reset: {jax.tree.structure(a)}\n"
                    f"  step:  {jax.tree.structure(b)}",
                    path,
                )
            for (path, x), (_, y) in zip(_leaves(a, root), _leaves(b, root)):
                (sx, dx, _), (sy, dy, _) = _aval(x), _aval(y)
                if sx != sy:
                    raise EnvCheckError("shape-stable", f"shape {sx} after reset but {sy} after step", path)
                if dx != dy:
                    raise EnvCheckError(
                        "dtype-stable",
                        f"{dx} after reset but {dy} after step; a lax.scan carry needs identical dtypes",
                        path,
                    )
        rdt, rshape = str(jnp.result_type(reward)), tuple(jnp.shape(reward))
        if rdt != "float32":
            raise EnvCheckError("reward-dtype", f"reward has dtype {rdt}, expected float32", "reward")
        if rshape != self.agent_lead:
            want = f"float32{list(self.agent_lead)} (one per agent)" if self.agent_lead else "a float32 scalar"
            raise EnvCheckError("reward-shape", f"reward has shape {rshape}, expected {want}", "reward")
        for name, flag in (("terminated", terminated), ("truncated", truncated)):
            fdt = str(jnp.result_type(flag))
            if fdt != "bool":
                raise EnvCheckError("flag-dtype", f"{name} has dtype {fdt}, expected bool", name)
            if tuple(jnp.shape(flag)) != ():
                raise EnvCheckError(
                    "flag-shape",
                    f"{name} has shape {tuple(jnp.shape(flag))}, expected a scalar (flags are per episode, not per agent)",
                    name,
                )
        self.check_info_structure(info, obs)
        return out

    def check_info_structure(self, info, obs):
        if not isinstance(info, Mapping):
            raise EnvCheckError("info-structure", f"info is {type(info).__name__}, expected a dict", "info")
        for k, v in info.items():
            path = "info" + keystr((DictKey(k),))
            if not isinstance(k, str):
                raise EnvCheckError("info-structure", f"info key {k!r} is not a string", path)
            if k == "final_obs":
                if jax.tree.structure(v) != jax.tree.structure(obs):
                    msg = "info['final_obs'] does not have the observation's structure"
                    raise EnvCheckError("info-structure", msg, path)
            elif not isinstance(v, jax.Array):
                raise EnvCheckError(
                    "info-structure", f"info values are arrays (info is a flat dict), got {type(v).__name__}", path
                )

    def info_signature(self, info, n_lead: int = 0) -> dict:
        return {p: (a[0][n_lead:], a[1]) for p, a in ((p, _aval(x)) for p, x in _leaves(info, "info"))}

    def check_info_same(self, ref: dict, other: dict, what: str):
        for p in list(ref) + [p for p in other if p not in ref]:
            if p not in other:
                raise EnvCheckError("info-stable", f"key present in the first step's info but missing {what}", p)
            if p not in ref:
                raise EnvCheckError("info-stable", f"key absent from the first step's info but present {what}", p)
            if ref[p] != other[p]:
                msg = f"(shape, dtype) {ref[p]} in the first step's info but {other[p]} {what}"
                raise EnvCheckError("info-stable", msg, p)

    # -- phases ---------------------------------------------------------------------------------
    def make_inputs(self):
        """Keys and random actions of the rollout, drawn once (outside the checked programs).

        Env ``b`` resets with ``reset_keys[b]`` and takes ``actions[t, b]`` with ``step_keys[t, b]``;
        ``alt_step_keys`` replaces ``step_keys`` in the key-sensitivity run.
        """
        k_reset, k_step, k_act, k_alt = jax.random.split(self.key, 4)
        self.reset_keys = jax.random.split(k_reset, self.B)
        self.step_keys = jax.random.split(k_step, (self.T, self.B))
        self.alt_step_keys = jax.random.split(k_alt, (self.T, self.B))
        self.actions = self.act_space.sample(k_act, (self.T, self.B) + self.agent_lead)
        # envs with legal actions: the action of (t, b) is drawn from obs["action_mask"] with this key
        self.action_keys = jax.random.split(jax.random.fold_in(k_act, 1), (self.T, self.B))

    @property
    def masked(self) -> bool:
        return self.traits.action_style == "full_action_set"

    def act(self, key, obs, action):
        """The action taken in ``obs`` (one env): uniformly random among the legal ones of
        ``obs["action_mask"]`` for a ``full_action_set`` env, else the pre-drawn ``action``."""
        if not self.masked:
            return action
        return self.act_space.sample(key, self.agent_lead, mask=obs["action_mask"])

    def check_single(self):
        """Jitted single-env reset and a few steps: structure, dtypes, trace counts."""
        env, params = self.env, self.params
        self.make_inputs()
        traces = {"reset": 0, "step": 0}

        def reset_fn(key, params):
            traces["reset"] += 1
            return env.reset(key, params)

        def step_fn(key, state, action, params):
            traces["step"] += 1
            return env.step(key, state, action, params)

        jreset, jstep = _jit(reset_fn), _jit(step_fn)
        obs0, state0 = self.check_reset_output(self.call("jit", "jax.jit(env.reset)", jreset, self.reset_keys[0], params))
        self.check_obs(obs0, 0, "after reset", ())
        if self.applies("mask-structure"):
            self.check_mask_obs(obs0, state0, "after reset")
        for path, x in _leaves(state0, "state"):
            if not isinstance(x, jax.Array):
                raise EnvCheckError("reset-structure", f"state leaves are arrays, got {type(x).__name__}", path)

        ok = _contains_each(self.act_space, self.actions, 2 + len(self.agent_lead))
        if not ok.all():
            bad = jax.tree.map(lambda a: np.asarray(a).reshape((-1,) + a.shape[2 + len(self.agent_lead) :]), self.actions)
            bad = jax.tree.map(lambda a: a[int(np.argmin(ok))], bad)
            raise EnvCheckError("action-sample", f"{bad} sampled from {self.act_space} is not contained in it", "action")

        loop, state, first_state_out, obs = [], state0, None, obs0
        for t in range(_PYTHON_LOOP_STEPS):
            k, a = self.step_keys[t, 0], jax.tree.map(lambda x: x[t, 0], self.actions)
            a = self.act(self.action_keys[t, 0], obs, a)
            out = self.check_step_output(self.call("jit", "jax.jit(env.step)", jstep, k, state, a, params), obs0, state0)
            self.check_obs(out[0], 0, f"after step {t}", ())
            loop.append(out)
            obs, state = out[0], out[1]
            first_state_out = out[1] if first_state_out is None else first_state_out
        self.call("jit", "jax.jit(env.reset)", jreset, self.reset_keys[-1], params)
        self.check_no_leaked_tracer()

        info_ref = self.info_signature(loop[0][5])
        for t, out in enumerate(loop[1:], 1):
            self.check_info_same(info_ref, self.info_signature(out[5]), f"in step {t}'s info")

        if self.applies("retrace"):
            calls = {"reset": 2, "step": len(loop)}
            for name, n in traces.items():
                if n == 1:
                    continue
                what = f"jax.jit(env.{name}) traced {n} times in {calls[name]} calls with the same shapes"
                if name == "step":  # the usual cause: a state leaf whose weak type changes
                    for (path, x), (_, y) in zip(_leaves(state0, "state"), _leaves(first_state_out, "state")):
                        wx, wy = ("weakly typed" if _aval(v)[2] else "strongly typed" for v in (x, y))
                        if wx != wy:
                            raise EnvCheckError(
                                "retrace",
                                f"{what}: the leaf is {wx} after reset but {wy} after step (give it an explicit "
                                "dtype in both, e.g. jnp.int32(0) or .astype)",
                                path,
                            )
                raise EnvCheckError("retrace", what)
        self.single = obs0, state0, loop, info_ref

    def check_vmap(self):
        """Trace reset and step vmapped over a batch of keys, then over a batch of params."""
        env, params, B = self.env, self.params, self.B
        actions = jax.tree.map(lambda x: x[0], self.actions)

        def reset_step(key, params, action):
            obs, state = env.reset(key, params)
            return env.step(key, state, action, params)

        self.call(
            "vmap",
            f"jax.vmap over {B} keys of (reset, step)",
            jax.eval_shape,
            jax.vmap(reset_step, (0, None, 0)),
            self.reset_keys,
            params,
            actions,
        )
        if self.applies("params-vmap"):
            batch = jax.tree.map(lambda x: jnp.stack([jnp.asarray(x)] * 2), params)
            self.call(
                "params-vmap",
                "jax.vmap over a batch of 2 params of (reset, step)",
                jax.eval_shape,
                jax.vmap(reset_step, (0, 0, None)),
                jax.random.split(self.reset_keys[0], 2),
                batch,
                jax.tree.map(lambda x: x[0], actions),
            )

    def rollout_fn(self):
        env = self.env

        def rollout(reset_keys, step_keys, actions, params, action_keys=self.action_keys):
            """reset_keys [B], step_keys [T, B], actions [T, B, ...] -> first obs/state, trajectory."""
            obs0, state0 = jax.vmap(env.reset, (0, None))(reset_keys, params)

            def body(carry, xs):
                obs, state = carry
                keys, actions, akeys = xs
                actions = jax.vmap(self.act)(akeys, obs, actions)
                obs, state, reward, terminated, truncated, info = jax.vmap(env.step, (0, 0, 0, None))(
                    keys, state, actions, params
                )
                out = {
                    "action": actions,
                    "obs": obs,
                    "state": state,
                    "reward": reward,
                    "terminated": terminated,
                    "truncated": truncated,
                    "info": info,
                }
                return (obs, state), out

            _, traj = jax.lax.scan(body, (obs0, state0), (step_keys, actions, action_keys))
            return {"obs": obs0, "state": state0}, traj

        return rollout

    def check_rollout(self):
        env, params, B, T = self.env, self.params, self.B, self.T
        obs0, state0, loop, info_ref = self.single
        inputs = (self.reset_keys, self.step_keys, self.actions, params)
        rollout = self.rollout_fn()
        try:
            traced = _jit(rollout).trace(*inputs)
        except EnvCheckError:
            raise
        except Exception as e:
            raise EnvCheckError("scan", f"a lax.scan rollout of env.step raised {type(e).__name__}: {e}") from e
        if self.applies("no-callbacks"):
            found = _callback_primitives(traced.jaxpr)
            if found:
                raise EnvCheckError(
                    "no-callbacks",
                    f"reset/step contain host callbacks {sorted(set(found))}; environments run entirely on the device",
                )
        compiled = self.call(
            "jit", "compiling the rollout", lambda: traced.lower().compile(_compiler_options(jax.default_backend()))
        )
        first, traj = compiled(*inputs)

        # batched shapes are the single-env shapes behind a batch axis
        for root, single, batched in (("obs", obs0, first["obs"]), ("state", state0, first["state"])):
            for (path, x), (_, y) in zip(_leaves(single, root), _leaves(batched, root)):
                if (B,) + _aval(x)[0] != _aval(y)[0] or _aval(x)[1] != _aval(y)[1]:
                    msg = f"{_aval(x)[:2]} unbatched but {_aval(y)[:2]} under vmap over {B} keys"
                    raise EnvCheckError("vmap", msg, path)

        self.check_obs(first["obs"], 1, "after reset", ("env",))
        self.check_obs(traj["obs"], 2, "along the rollout", ("step", "env"))
        if "final_obs" in traj["info"]:
            self.check_obs(traj["info"]["final_obs"], 2, "along the rollout", ("step", "env"), root="info['final_obs']")

        self.check_info_same(info_ref, self.info_signature(traj["info"], 2), "inside lax.scan under vmap")
        default = getattr(env, "default_params", None)
        if default is not None and default is not params:
            action = jax.tree.map(lambda x: x[0, 0], self.actions)

            def step_default(key):
                _, state = env.reset(key, default)
                return env.step(key, state, action, default)[5]

            info_default = self.call(
                "jit", "env.step with env.default_params", jax.eval_shape, step_default, self.reset_keys[0]
            )
            self.check_info_same(self.info_signature(info_default), info_ref, "with the params under test")

        if self.applies("reward-finite"):
            r = np.asarray(traj["reward"])
            ok = np.isfinite(r).reshape(-1)
            if not ok.all():
                i = int(np.argmin(ok))
                at = _index_label(i, r.shape, ("step", "env", "agent"))
                raise EnvCheckError("reward-finite", f"reward {r.reshape(-1)[i]} at ({at}) is not finite", "reward")

        # determinism: rerun the same program, and compare with the separately compiled single steps
        _, traj2 = compiled(*inputs)
        diff = _first_difference(traj, traj2, exact=True)
        if diff:
            raise EnvCheckError(
                "deterministic",
                f"two runs of the same compiled rollout with the same keys differ at element {diff[1]} (host "
                "callbacks or other randomness outside jax.random?)",
                diff[0],
            )
        names = ("obs", "state", "reward", "terminated", "truncated", "info")
        pairs = [("reset", {"obs": obs0, "state": state0}, jax.tree.map(lambda x: x[0], first))]
        pairs += [(f"step {t}", dict(zip(names, out)), jax.tree.map(lambda x: x[t, 0], traj)) for t, out in enumerate(loop)]
        for when, single, batched in pairs:
            diff = _first_difference(single, batched, exact=False)
            if diff:
                raise EnvCheckError(
                    "deterministic",
                    f"the same keys gave different values at {when} (element {diff[1]}) in a jitted single-env call "
                    "and in the vmapped lax.scan rollout (randomness drawn at trace time, e.g. with numpy or "
                    "Python's random?)",
                    diff[0],
                )

        self.actions = traj["action"]  # what was taken (masked envs draw it from the mask)
        if self.applies("mask-autoreset"):
            self.check_mask_rollout(first, traj)

        if self.applies("key-sensitivity"):
            _, traj3 = compiled(self.reset_keys, self.alt_step_keys, self.actions, params)
            if _first_difference(traj, traj3, exact=True) is None:
                raise EnvCheckError(
                    "key-sensitivity",
                    f"traits.chance is 'stochastic' but {B} envs x {T} steps gave the same trajectory for two different "
                    "step keys (does step ignore its key? If only reset is random, the chance trait is 'deterministic'; "
                    "for rare events raise num_steps/num_envs)",
                )
        self.terminated, self.truncated = int(np.sum(traj["terminated"])), int(np.sum(traj["truncated"]))

    def check_step_ignores_key(self):
        """The base env's ``step_env`` under two different key sequences, same actions."""
        base, params = self.env.unwrapped, self.params

        def rollout(step_keys):
            _, state = jax.vmap(base.reset_env, in_axes=(0, None))(self.reset_keys, params)

            def body(state, xs):
                keys, action = xs
                out = jax.vmap(base.step_env, in_axes=(0, 0, 0, None))(keys, state, action, params)
                return out[1], out

            return jax.lax.scan(body, state, (step_keys, self.actions))[1]

        traj = _jit(rollout)(self.step_keys), _jit(rollout)(self.alt_step_keys)
        names = ("obs", "state", "reward", "terminated", "truncated", "info")
        diff = _first_difference(dict(zip(names, traj[0])), dict(zip(names, traj[1])), exact=True)
        if diff:
            raise EnvCheckError(
                "step-ignores-key",
                f"traits.chance is 'deterministic' but the step's result changed with its key (element {diff[1]}); "
                "a step that draws randomness has chance='stochastic'",
                diff[0],
            )

    # -- turn-based games: legal actions, current player, explicit chance ------------------------
    def check_turn_traits(self):
        """``traits-implemented``: each turn-based trait is declared exactly when it is implemented."""
        base = getattr(self.env, "unwrapped", self.env)
        t = base.traits

        def defines(name):
            return getattr(type(base), name, None) is not getattr(Environment, name)

        claims = (
            ("action_style", t.action_style == "full_action_set", "'full_action_set'", ("legal_action_mask",)),
            ("dynamics", t.dynamics == "sequential", "'sequential'", ("current_player",)),
            ("chance", t.chance == "explicit_stochastic", "'explicit_stochastic'",
             ("is_chance_node", "chance_outcomes", "apply_chance")),
        )
        for trait, declared, value, methods in claims:
            missing = [m for m in methods if not defines(m)]
            present = [m for m in methods if defines(m)]
            if declared and missing:
                raise EnvCheckError(
                    "traits-implemented",
                    f"traits.{trait} is {value} but {type(base).__name__} does not define {', '.join(missing)}",
                )
            if not declared and present:
                raise EnvCheckError(
                    "traits-implemented",
                    f"{type(base).__name__} defines {', '.join(present)} but traits.{trait} is "
                    f"{getattr(t, trait)!r}, not {value}",
                )
        if self.masked and not isinstance(self.act_space, spaces.Discrete):
            raise EnvCheckError(
                "traits-implemented", f"action_style='full_action_set' needs a Discrete action space, got {self.act_space}"
            )

    def _mask_shape(self) -> tuple[int, ...]:
        return self.agent_lead + (self.act_space.n,)

    def check_mask_obs(self, obs, state, where: str):
        """``mask-structure`` for one (unbatched) observation and state."""
        if not (isinstance(obs, Mapping) and "observation" in obs and "action_mask" in obs):
            got = sorted(obs) if isinstance(obs, Mapping) else type(obs).__name__
            raise EnvCheckError(
                "mask-structure",
                f"a full_action_set env's observation is a dict with 'observation' and 'action_mask', got {got} {where}",
                "obs",
            )
        mask = self.call("mask-structure", "env.legal_action_mask", self.env.legal_action_mask, state, self.params)
        if str(jnp.result_type(mask)) != "bool" or tuple(jnp.shape(mask)) != self._mask_shape():
            raise EnvCheckError(
                "mask-structure",
                f"legal_action_mask returned {jnp.result_type(mask)}{list(jnp.shape(mask))}, expected "
                f"bool{list(self._mask_shape())} {where}",
            )
        om = obs["action_mask"]
        if str(jnp.result_type(om)) != "uint8" or tuple(jnp.shape(om)) != self._mask_shape():
            raise EnvCheckError(
                "mask-structure",
                f"{jnp.result_type(om)}{list(jnp.shape(om))} {where}, expected uint8{list(self._mask_shape())}",
                "obs['action_mask']",
            )
        if not np.array_equal(_host(om), _host(mask).astype(np.uint8)):
            raise EnvCheckError(
                "mask-structure",
                f"{_host(om).tolist()} {where} but legal_action_mask of the returned state is "
                f"{_host(mask).astype(np.uint8).tolist()}",
                "obs['action_mask']",
            )

    def batched(self, fn, tree, n_batch: int):
        """``fn`` (of one env's state) over ``tree``'s ``n_batch`` leading axes, jitted."""
        lead = tuple(jnp.shape(_first_leaf(tree)))[:n_batch]
        flat = jax.tree.map(lambda x: jnp.reshape(x, (-1,) + tuple(jnp.shape(x))[n_batch:]), tree)
        out = _jit(jax.vmap(fn))(flat)
        return jax.tree.map(lambda x: np.asarray(x).reshape(lead + x.shape[1:]), out)

    def check_mask_rollout(self, first, traj):
        """``mask-structure`` and ``mask-autoreset`` along the vmapped rollout."""
        params = self.params
        mask_fn = lambda s: self.env.legal_action_mask(s, params)  # noqa: E731
        done = np.asarray(traj["terminated"]) | np.asarray(traj["truncated"])
        for where, obs, states, n in (("after reset", first["obs"], first["state"], 1),
                                      ("along the rollout", traj["obs"], traj["state"], 2)):
            masks = self.call("mask-structure", "vmap(env.legal_action_mask)", self.batched, mask_fn, states, n)
            om = _host(obs["action_mask"])
            if om.dtype != np.uint8 or masks.dtype != bool:
                raise EnvCheckError("mask-structure", f"obs mask {om.dtype}, legal_action_mask {masks.dtype} {where}")
            bad = np.any(om != masks.astype(np.uint8), axis=tuple(range(n, om.ndim)))
            if bad.any():
                i = int(np.argmax(bad.reshape(-1)))
                names = ("env",) if n == 1 else ("step", "env")
                at = _index_label(i, bad.shape, names)
                rule = "mask-autoreset" if n == 2 and done.reshape(-1)[i] else "mask-structure"
                extra = " (the step ended an episode: after the auto-reset the mask is the new game's)" if rule == "mask-autoreset" else ""
                raise EnvCheckError(
                    rule,
                    f"{om.reshape(-1, *om.shape[n:])[i].tolist()} {where} ({at}) but legal_action_mask of the returned "
                    f"state is {masks.reshape(-1, *masks.shape[n:])[i].astype(np.uint8).tolist()}{extra}",
                    "obs['action_mask']",
                )
        self.check_final_obs_mask(first, traj, done)

    def check_final_obs_mask(self, first, traj, done):
        """``mask-autoreset``: ``info["final_obs"]["action_mask"]`` of an ended episode is the mask
        of the state it ended in (that step replayed below the outermost AutoReset)."""
        from jaxenvs.wrappers.base import AutoReset

        if not (isinstance(self.env, AutoReset) and "final_obs" in traj["info"]) or not done.any():
            return
        inner, params = self.env.env, self.params
        t_idx, b_idx = np.nonzero(done)
        prev = jax.tree.map(
            lambda f, s: jnp.concatenate([f[None], s[:-1]])[t_idx, b_idx], first["state"], traj["state"]
        )
        keys = self.step_keys[t_idx, b_idx]
        actions = jax.tree.map(lambda a: a[t_idx, b_idx], traj["action"])

        def ended(key, state, action):
            key_step, _ = self.env.split_key(key)
            _, state, *_ = inner.step_env(key_step, state, action, params)
            return inner.legal_action_mask(state, params)

        masks = np.asarray(_jit(jax.vmap(ended))(keys, prev, actions)).astype(np.uint8)
        final = _host(traj["info"]["final_obs"]["action_mask"])[t_idx, b_idx]
        bad = np.any(final != masks, axis=tuple(range(1, final.ndim)))
        if bad.any():
            i = int(np.argmax(bad))
            raise EnvCheckError(
                "mask-autoreset",
                f"{final[i].tolist()} at step {t_idx[i]}, env {b_idx[i]}, where the episode ended, but the ended "
                f"state's legal_action_mask is {masks[i].tolist()}",
                "info['final_obs']['action_mask']",
            )

    def visited_states(self):
        """States of ``MASK_STEP_STATES`` env steps (the state each action is taken in): a
        random-legal rollout of the env with an auto-reset (added when the env has none), so that
        every state is a live one."""
        from jaxenvs.wrappers.base import AutoReset, has_wrapper

        env = self.env if has_wrapper(self.env, AutoReset) else AutoReset(self.env)
        params, B = self.params, 32
        T = -(-MASK_STEP_STATES // B)
        k_reset, k_run = jax.random.split(jax.random.fold_in(self.key, 7))

        def run(k_reset, k_run):
            obs, state = jax.vmap(env.reset, (0, None))(jax.random.split(k_reset, B), params)

            def body(carry, key):
                obs, state = carry
                k_act, k_step = jax.random.split(key)
                action = self.act_space.sample(k_act, (B,) + self.agent_lead)
                action = jax.vmap(self.act)(jax.random.split(k_act, B), obs, action)
                out = jax.vmap(env.step, (0, 0, 0, None))(jax.random.split(k_step, B), state, action, params)
                return (out[0], out[1]), state

            return jax.lax.scan(body, (obs, state), jax.random.split(k_run, T))[1]

        states = self.call("mask-step", "a rollout collecting visited states", _jit(run), k_reset, k_run)
        return env, jax.tree.map(lambda x: x.reshape((T * B,) + x.shape[2:]), states)

    def check_turn_based(self):
        env, states = self.visited_states()
        params, n_states = self.params, MASK_STEP_STATES
        probe = _jit(jax.vmap(lambda s: (
            env.current_player(s, params),
            env.is_chance_node(s, params),
            env.legal_action_mask(s, params) if self.masked else jnp.zeros((), bool),
        )))
        player, chance, masks = (np.asarray(x) for x in self.call("current-player", "env.current_player", probe, states))
        n = self.num_agents
        if self.applies("current-player"):
            if player.dtype != np.int32 or player.shape != (n_states,):
                raise EnvCheckError("current-player", f"current_player returned {player.dtype}{list(player.shape[1:])}, expected an int32 scalar")
            if ((player < 0) | (player >= n)).any():
                i = int(np.argmax((player < 0) | (player >= n)))
                raise EnvCheckError("current-player", f"current_player is {player[i]} in a visited state; it must lie in [0, {n})")
        if chance.dtype != bool or chance.shape != (n_states,):
            raise EnvCheckError("chance-outcomes", f"is_chance_node returned {chance.dtype}{list(chance.shape[1:])}, expected a bool scalar")
        if self.applies("mask-mover"):
            self.check_mask_mover(masks, player, chance)
        if self.applies("mask-step"):
            self.check_mask_step(env, states, masks, player, chance)
        if self.applies("non-mover-ignored"):
            self.check_non_mover_ignored(env, states, masks, player, chance)
        if self.applies("chance-outcomes"):
            self.check_chance(env, states, chance)
            if self.applies("apply-chance"):
                self.check_apply_chance(env, states, chance)

    def check_mask_mover(self, masks, player, chance):
        """``mask-mover``: at decision states (every visited state is live) the mover has a legal
        action and the others none; at chance nodes nobody has one."""
        sequential = self.traits.dynamics == "sequential" and self.multi
        rows = masks if self.agent_lead else masks[:, None]
        has = rows.any(-1)  # [state, agent]
        mover = np.arange(rows.shape[1])[None, :] == player[:, None] if sequential else np.ones_like(has)
        for i in range(len(rows)):
            if chance[i] and has[i].any():
                raise EnvCheckError("mask-mover", f"agent {int(np.argmax(has[i]))} has legal actions at a chance node (visited state {i})")
            if chance[i]:
                continue
            if not has[i][mover[i]].all():
                who = f"the mover (agent {player[i]})" if sequential else f"agent {int(np.argmin(has[i]))}"
                raise EnvCheckError("mask-mover", f"{who} has no legal action in a live decision state (visited state {i})")
            if sequential and has[i][~mover[i]].any():
                raise EnvCheckError(
                    "mask-mover",
                    f"agent {int(np.argmax(has[i] & ~mover[i]))} is not to move (current_player is {player[i]}) but its "
                    f"mask row is not all zero (visited state {i})",
                )

    @property
    def multi(self) -> bool:
        return bool(self.agent_lead)

    def _joint(self, mover_action, player, others):
        """Joint actions [S, num_agents]: ``mover_action`` in the mover's row, ``others`` elsewhere."""
        if not self.multi:
            return jnp.asarray(mover_action, jnp.int32)
        rows = np.arange(self.num_agents)[None, :] == np.asarray(player)[:, None]
        return jnp.asarray(np.where(rows, np.asarray(mover_action)[:, None], others), jnp.int32)

    def check_mask_step(self, env, states, masks, player, chance):
        """``mask-step``: every action in every visited decision state; info["illegal_action"] is
        true exactly for the actions the mask rules out."""
        params, n_act = self.params, self.act_space.n
        live = ~chance
        sequential = self.traits.dynamics == "sequential" and self.multi
        key = jax.random.fold_in(self.key, 11)

        def illegal_flags(state, joint):
            info = env.step(key, state, joint, params)[5]
            if "illegal_action" not in info:
                raise EnvCheckError("mask-step", "a full_action_set env reports info['illegal_action'] (bool) on every step", "info")
            return info["illegal_action"]

        run = _jit(jax.vmap(illegal_flags))
        rows = masks if self.multi else masks[:, None]
        for a in range(n_act):
            if sequential:
                joint = self._joint(np.full(len(player), a), player, 0)
                expected = ~rows[np.arange(len(player)), player, a]
            else:
                joint = jnp.full((len(player),) + self.agent_lead, a, jnp.int32)
                expected = ~rows[:, :, a].all(-1)
            flags = self.call("mask-step", "env.step from visited states", run, states, joint)
            flags = np.asarray(flags)
            if flags.dtype != bool or flags.shape != (len(player),):
                raise EnvCheckError("mask-step", f"info['illegal_action'] is {flags.dtype}{list(flags.shape[1:])}, expected a bool scalar", "info['illegal_action']")
            bad = live & (flags != expected)
            if bad.any():
                i = int(np.argmax(bad))
                raise EnvCheckError(
                    "mask-step",
                    f"action {a} in visited state {i} (mask {rows[i].astype(np.uint8).tolist()}): step says illegal={bool(flags[i])}, "
                    f"the mask says illegal={bool(expected[i])}",
                    "info['illegal_action']",
                )

    def check_non_mover_ignored(self, env, states, masks, player, chance):
        """``non-mover-ignored``: the same mover's action with other values in the non-movers'
        rows (in range and out of it) gives the same step, leaf for leaf."""
        params, n_act, S = self.params, self.act_space.n, len(player)
        rng = np.random.default_rng(0)
        if self.masked:
            rows = masks if self.multi else masks[:, None]
            mover_rows = rows[np.arange(S), player]
            choice = np.array([rng.choice(np.flatnonzero(r)) if r.any() else 0 for r in mover_rows])
        else:
            choice = rng.integers(0, n_act, S)
        key = jax.random.fold_in(self.key, 13)
        step = _jit(jax.vmap(lambda s, a: env.step(key, s, a, params)))
        ref = self.call("non-mover-ignored", "env.step from visited states", step, states, self._joint(choice, player, 0))
        for others in (rng.integers(0, n_act, (S, self.num_agents)), np.full((S, self.num_agents), -1), np.full((S, self.num_agents), n_act + 5)):
            out = step(states, self._joint(choice, player, others))
            names = ("obs", "state", "reward", "terminated", "truncated", "info")
            diff = _first_difference(dict(zip(names, ref)), dict(zip(names, out)), exact=True)
            if diff:
                raise EnvCheckError(
                    "non-mover-ignored",
                    f"changing only the non-movers' actions (to {others[0].tolist()} in the first state) changed "
                    f"the step's result (element {diff[1]}); a sequential step reads the current player's row only",
                    diff[0],
                )

    def check_chance(self, env, states, chance):
        """``chance-outcomes``: probabilities at the visited chance nodes, then CHANCE_DRAWS steps
        from the first one: the outcomes drawn follow chance_outcomes (chi-square at level
        CHANCE_LEVEL), impossible ones never come, and apply_chance reproduces step's state."""
        if not chance.any():
            raise EnvCheckError(
                "chance-outcomes",
                f"traits.chance is 'explicit_stochastic' but none of {len(chance)} visited states is a chance node",
            )
        params = self.params
        idx = np.flatnonzero(chance)
        nodes = jax.tree.map(lambda x: x[idx], states)
        probs = self.call("chance-outcomes", "env.chance_outcomes", _jit(jax.vmap(lambda s: env.chance_outcomes(s, params))), nodes)
        probs = np.asarray(probs)
        if probs.dtype != np.float32 or probs.ndim != 2:
            raise EnvCheckError("chance-outcomes", f"chance_outcomes returned {probs.dtype}{list(probs.shape[1:])}, expected float32[K]")
        if (probs < 0).any() or not np.allclose(probs.sum(-1), 1.0, atol=1e-5):
            i = int(np.argmax((probs < 0).any(-1) | ~np.isclose(probs.sum(-1), 1.0, atol=1e-5)))
            raise EnvCheckError("chance-outcomes", f"chance_outcomes {probs[i].tolist()} at a chance node: probabilities are >= 0 and sum to 1")
        node = jax.tree.map(lambda x: x[idx[0]], states)
        p = probs[0]
        action = jnp.zeros(self.agent_lead, jnp.int32)
        keys = jax.random.split(jax.random.fold_in(self.key, 17), CHANCE_DRAWS)
        base_state = getattr(env, "unwrapped_state", lambda s: s)

        def draw(key):
            _, stepped, *_, info = env.step(key, node, action, params)
            if "chance_outcome" not in info:
                raise EnvCheckError("chance-outcomes", "step at a chance node reports the outcome drawn in info['chance_outcome']", "info")
            outcome = info["chance_outcome"]
            applied = env.apply_chance(node, outcome, params)
            same = jax.tree.map(lambda x, y: jnp.all(x == y), base_state(stepped), base_state(applied))
            return outcome, jnp.all(jnp.stack(jax.tree.leaves(same)))

        outcomes, same = self.call("chance-outcomes", "env.step at a chance node", _jit(jax.vmap(draw)), keys)
        outcomes, same = np.asarray(outcomes), np.asarray(same)
        if ((outcomes < 0) | (outcomes >= len(p))).any():
            raise EnvCheckError("chance-outcomes", f"info['chance_outcome'] {outcomes.min()}..{outcomes.max()} at a chance node, expected indices into chance_outcomes' {len(p)}")
        if not same.all():
            raise EnvCheckError(
                "chance-outcomes",
                f"apply_chance(state, {outcomes[int(np.argmin(same))]}) differs from the state step reached drawing that outcome",
            )
        counts = np.bincount(outcomes, minlength=len(p))
        if (counts[p == 0] > 0).any():
            raise EnvCheckError("chance-outcomes", f"step drew outcome {int(np.argmax(counts * (p == 0)))}, whose probability is 0")
        support = p > 0
        if support.sum() > 1:
            import scipy.stats

            expected = p[support].astype(np.float64) / p[support].astype(np.float64).sum() * CHANCE_DRAWS
            pvalue = scipy.stats.chisquare(counts[support], expected).pvalue
            if pvalue < CHANCE_LEVEL:
                raise EnvCheckError(
                    "chance-outcomes",
                    f"step's draws {counts.tolist()} in {CHANCE_DRAWS} steps do not follow chance_outcomes {p.tolist()} "
                    f"(chi-square p = {pvalue:.2g} < {CHANCE_LEVEL})",
                )

    def applies(self, rule: str) -> bool:
        """``rule`` concerns this environment (its traits) and is not skipped."""
        return rule not in self.skip and RULEBOOK[rule].applies_to(self.traits)

    def check_apply_chance(self, env, states, chance):
        """``apply-chance``: eager (host) calls at the first visited chance node: each outcome of
        probability > 0 is applied, each of probability 0, -1 and ``K`` (out of range) raise a
        ValueError; at the first visited decision state (if any) a possible outcome raises too."""
        params = self.params
        pick = lambda i: jax.tree.map(lambda x: x[i], states)  # noqa: E731
        node = pick(int(np.flatnonzero(chance)[0]))
        probs = np.asarray(env.chance_outcomes(node, params))
        possible = [int(o) for o in np.flatnonzero(probs > 0)]
        for o in possible:
            self.call("apply-chance", f"env.apply_chance(state, {o}) at a chance node (probability {probs[o]:g})", env.apply_chance, node, jnp.int32(o), params)
        bad = [(o, f"outcome {o} of probability 0") for o in np.flatnonzero(probs <= 0).tolist()]
        bad += [(-1, "outcome -1 (out of range)"), (len(probs), f"outcome {len(probs)} (out of range)")]
        cases = [(node, o, f"{why} at a chance node (chance_outcomes {probs.tolist()})") for o, why in bad]
        if (~chance).any() and possible:
            cases.append((pick(int(np.flatnonzero(~chance)[0])), possible[0], f"outcome {possible[0]} at a decision state (not a chance node)"))
        for state, o, why in cases:
            try:
                env.apply_chance(state, jnp.int32(o), params)
            except ValueError:
                continue
            except Exception as e:
                raise EnvCheckError("apply-chance", f"apply_chance of {why} raised {type(e).__name__}, expected a ValueError: {e}") from e
            raise EnvCheckError(
                "apply-chance",
                f"apply_chance accepted {why}; called with concrete arguments it must raise a ValueError "
                "(jaxenvs.core.check_chance_outcome does the checks)",
            )


    def run(self) -> CheckReport:
        self.check_static()  # the traits, which every other phase's rules are chosen by
        rules = tuple(r.id for r in RULEBOOK.values() if r.applies_to(self.traits))
        for phase in PHASES[1:]:
            if any(phase in RULEBOOK[r].phases for r in rules):
                getattr(self, phase)()
        return CheckReport(
            env=self.name,
            num_envs=self.B,
            num_steps=self.T,
            rules=tuple(r for r in rules if r not in self.skip),
            skipped=self.skip,
            terminated=self.terminated,
            truncated=self.truncated,
        )
