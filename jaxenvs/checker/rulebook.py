"""The rules of the environment contract, each declared once (`Rule` in `RULEBOOK`): what it
checks, which environments it applies to, whether it may be skipped, and the phase that checks it
(a method of `jaxenvs.checker.phases.Checker` or of its turn-based part,
`jaxenvs.checker.turn_phases.TurnPhases`)."""

from __future__ import annotations

import dataclasses
from typing import Callable

from jaxenvs.core import Traits

__all__ = ["Rule", "RULEBOOK", "RULES", "PHASES", "rules_table"]


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rule of the contract, declared once in `RULEBOOK`.

    ``id`` is the stable id an `EnvCheckError` carries, ``text`` what the rule checks (the words
    of ``jaxenvs check --list-rules``, of this module's docstring and of the docs' rule table),
    ``applies_to`` the environments it concerns (a predicate of their `Traits`), ``skippable``
    whether ``check_env(skip=...)`` may leave it out (its failure leaves the rest of the check
    meaningful), and ``phases`` the `Checker` methods that check it (of `PHASES`). `check_env`
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
# in the phase it names (`jaxenvs.checker.phases` or `.turns`). The package docstring, `jaxenvs check --list-rules` and the docs
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
# the `Checker` methods that check the rules, in the order they run (each reads what the ones
# before it found: the traits and spaces, the single-env steps, the rollout)
PHASES = ("check_static", "check_turn_traits", "check_single", "check_vmap", "check_rollout",
          "check_step_ignores_key", "check_turn_based")
assert {phase for rule in RULEBOOK.values() for phase in rule.phases} == set(PHASES)


def rules_table() -> str:
    """The rules as an indented text table (rule id, then what it checks)."""
    width = max(map(len, RULEBOOK))
    return "\n".join(f"    {rule.id:<{width}}  {rule.text}" for rule in RULEBOOK.values())
