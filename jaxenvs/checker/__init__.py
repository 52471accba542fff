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

from typing import Any, Iterable

import jax

from jaxenvs.core import check_key
from .phases import PYTHON_LOOP_STEPS, Checker
from .results import CheckReport, EnvCheckError
from .rulebook import PHASES, RULEBOOK, RULES, Rule, rules_table

__all__ = ["check_env", "EnvCheckError", "CheckReport", "Rule", "RULEBOOK", "RULES", "PHASES"]

__doc__ = (__doc__ or "") + "\nThe rules:\n\n" + rules_table() + "\n"


_HOST_ENV_CHECKERS = {
    "gymnasium": "gymnasium.utils.env_checker.check_env",
    "gym": "gymnasium.utils.env_checker.check_env",
    "pettingzoo": "pettingzoo.test.api_test",
}


def _refuse_host_env(env) -> None:
    """A Gymnasium or PettingZoo env (a stateful host object) is not a jaxenvs environment: say so
    and name the checker that fits it, instead of failing on the first missing attribute."""
    for cls in type(env).__mro__:
        library = cls.__module__.split(".")[0]
        if library in _HOST_ENV_CHECKERS:
            raise TypeError(
                f"check_env takes a jaxenvs Environment (pure reset(key, params) and step(key, state, action, "
                f"params)); got {type(env).__module__}.{type(env).__qualname__}, a {library} env. Check it with "
                f"{_HOST_ENV_CHECKERS[library]}, or compare a jaxenvs port with it: "
                f"jaxenvs.testing.verify_port(port, reference=<this env or its id>)"
            )


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
    _refuse_host_env(env)
    if key is not None:
        check_key(key, "check_env")
    skip = tuple(skip)
    bad = [r for r in skip if r not in RULEBOOK or not RULEBOOK[r].skippable]
    if bad:
        skippable = [r.id for r in RULEBOOK.values() if r.skippable]
        raise ValueError(f"check_env cannot skip {bad}; skippable rules: {skippable}")
    for name, v, lo in (("num_steps", num_steps, PYTHON_LOOP_STEPS), ("num_envs", num_envs, 1)):
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise ValueError(f"check_env needs {name} as an int >= {lo}, got {v!r}")
    with jax.disable_jit(False):  # under disable_jit every call would trace and nothing compile
        return Checker(env, params, key, num_steps, num_envs, skip).run()
