"""jaxenvs.check_env: a correct toy environment passes, and each broken variant trips its rule.

Every broken environment below is a small subclass of ``Walk`` (or ``Duel``, its two-agent twin)
that breaks exactly one rule; the test asserts the rule id and the offending leaf path.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

import jaxenvs
from jaxenvs import spaces
from jaxenvs.checker import PHASES, RULEBOOK, RULES, CheckReport, EnvCheckError, Rule, check_env
from jaxenvs.core import Environment, Traits, check_chance_outcome, is_concrete

SMALL = dict(num_steps=12, num_envs=3)


@struct.dataclass
class WalkParams:
    noise: float = 0.05  # half-width of the uniform step noise
    verbose: bool = struct.field(pytree_node=False, default=False)


@struct.dataclass
class WalkState:
    pos: jax.Array  # float32[]
    t: jax.Array  # int32[]


class Walk(Environment):
    """1-D noisy walk on [-1, 1]: action 1 moves +0.1, action 0 moves -0.1, plus U(-noise, noise);
    terminated at |pos| = 1; reward -|pos|; obs {"pos": float32[1], "t": int32[]}."""

    traits = Traits(chance="stochastic")

    @property
    def default_params(self):
        return WalkParams()

    def reset_env(self, key, params):
        state = WalkState(jax.random.uniform(key, (), jnp.float32, -0.5, 0.5), jnp.zeros((), jnp.int32))
        return self.obs(state), state

    def step_env(self, key, state, action, params):
        noise = jax.random.uniform(self.noise_key(key), (), jnp.float32, -params.noise, params.noise)
        pos = jnp.clip(state.pos + jnp.where(action == 1, 0.1, -0.1) + noise, -1.0, 1.0)
        state = self.next_state(state, pos)
        terminated = jnp.abs(pos) >= 1.0
        return self.obs(state), state, self.reward(state), terminated, jnp.zeros((), bool), self.info(state, params)

    # the pieces broken variants override
    def noise_key(self, key):
        return key

    def next_state(self, state, pos):
        return WalkState(pos, state.t + 1)

    def reward(self, state):
        return -jnp.abs(state.pos)

    def obs(self, state):
        return {"pos": state.pos[None], "t": state.t}

    def info(self, state, params):
        return {"t": state.t}

    def observation_space(self, params=None):
        return spaces.Dict({"pos": spaces.Box(-1.0, 1.0, (1,)), "t": spaces.Box(0, 2**30, (), np.int32)})

    def action_space(self, params=None):
        return spaces.Discrete(2)


def expect(env, rule, path=None, match=None, **kwargs):
    """Run check_env and return the EnvCheckError, asserting its rule id and leaf path."""
    with pytest.raises(EnvCheckError) as info:
        check_env(env, **{**SMALL, **kwargs})
    err = info.value
    assert err.rule == rule, str(err)
    assert str(err).startswith(f"[{rule}]")
    if path is not None:
        assert err.path == path, str(err)
        assert path in str(err)
    if match is not None:
        assert match in str(err), str(err)
    return err


# ---- correct environments pass ------------------------------------------------------------------


def test_correct_env_passes_and_reports():
    report = check_env(Walk(), num_steps=50, num_envs=4)
    assert isinstance(report, CheckReport)
    assert (report.env, report.num_envs, report.num_steps) == ("Walk", 4, 50)
    # stochastic: key-sensitivity is checked too, step-ignores-key is not; no turn-based rule but
    # traits-implemented applies to a single-agent env without legal actions
    turn_based = ("mask-structure", "mask-autoreset", "current-player", "mask-mover", "mask-step", "non-mover-ignored",
                  "chance-outcomes", "apply-chance")
    assert report.rules == tuple(r for r in RULES if r != "step-ignores-key" and r not in turn_based)
    # Walk never truncates; random walks from |pos| <= 0.5 reach the edge within 4 x 50 steps
    assert report.truncated == 0 and report.terminated > 0


def test_raw_prng_key_and_explicit_params_accepted():
    report = check_env(Walk(), WalkParams(noise=0.01), key=jax.random.PRNGKey(7), **SMALL)
    assert report.skipped == ()


def test_deterministic_env_is_not_checked_for_key_sensitivity():
    class Det(Walk):
        traits = Traits(chance="deterministic")

    report = check_env(Det(), WalkParams(noise=0.0), **SMALL)
    assert "key-sensitivity" not in report.rules and "step-ignores-key" in report.rules


def test_deterministic_env_whose_step_uses_its_key():
    """AutoReset and VectorEnv hand a deterministic step the reset's key: it must not use it."""

    class Det(Walk):
        traits = Traits(chance="deterministic")

    expect_params = WalkParams(noise=0.1)
    with pytest.raises(EnvCheckError) as info:
        check_env(Det(), expect_params, **SMALL)
    assert info.value.rule == "step-ignores-key" and "chance='stochastic'" in str(info.value)


def test_exported_at_top_level():
    assert jaxenvs.check_env is check_env and "check_env" in jaxenvs.__all__


def test_error_is_an_assertion_error_with_rule_and_path():
    err = EnvCheckError("dtype-stable", "int32 after reset but float32 after step", "state.t")
    assert isinstance(err, AssertionError)
    assert (err.rule, err.path) == ("dtype-stable", "state.t")
    assert str(err) == "[dtype-stable] state.t: int32 after reset but float32 after step"


def test_bad_arguments():
    with pytest.raises(ValueError, match="cannot skip.*'dtype-stable'.*skippable"):
        check_env(Walk(), skip=["dtype-stable"])
    with pytest.raises(ValueError, match="num_steps as an int >= 3"):
        check_env(Walk(), num_steps=1)
    with pytest.raises(ValueError, match="num_envs"):
        check_env(Walk(), num_envs=0)
    skippable = [r for r in RULES if RULEBOOK[r].skippable]
    assert skippable == ["obs-in-space", "retrace", "params-vmap", "no-callbacks", "reward-finite", "key-sensitivity"]
    with pytest.raises(ValueError, match=r"cannot skip \['no-such-rule'\].*'retrace'"):
        check_env(Walk(), skip=["no-such-rule"])


def test_every_rule_is_declared_once_with_its_phases():
    assert all(isinstance(r, Rule) and r.id == rid and r.text for rid, r in RULEBOOK.items())
    assert all(r.phases and set(r.phases) <= set(PHASES) for r in RULEBOOK.values())
    from jaxenvs.checker.phases import Checker as _Checker

    assert all(callable(getattr(_Checker, phase, None)) for phase in PHASES)


# ---- one broken rule each -----------------------------------------------------------------------


def test_traits_not_a_traits_instance():
    class E(Walk):
        traits = {"num_agents": 1}

    expect(E(), "traits", match="jaxenvs.Traits")


def test_traits_inconsistent_with_num_agents():
    class E(Walk):
        num_agents = 2

    expect(E(), "traits", match="num_agents=2")


def test_spaces_must_be_jaxenvs_spaces():
    import gymnasium

    class E(Walk):
        def action_space(self, params=None):
            return gymnasium.spaces.Discrete(2)

    expect(E(), "spaces", match="action_space")


def test_invalid_params_rejected():
    class E(Walk):
        def validate_params(self, params):
            if params.noise < 0:
                raise ValueError("noise must be >= 0")

    expect(E(), "params", match="noise must be >= 0", params=WalkParams(noise=-1.0))


def test_batched_action_shape_must_follow_the_space():
    class E(Walk):
        def batched_action_shape(self, params=None):
            return (1,)

    expect(E(), "action-shape", path="action")


def test_python_control_flow_on_traced_values_fails_jit():
    class E(Walk):
        def reward(self, state):
            return jnp.float32(1.0) if state.pos > 0 else jnp.float32(0.0)

    expect(E(), "jit", match="TracerBoolConversionError")


def test_step_that_stores_its_traced_state_on_self_leaks_a_tracer():
    class E(Walk):
        def next_state(self, state, pos):
            self.last_state = state  # impure: the traced state outlives the trace
            return WalkState(pos, state.t + 1)

    expect(E(), "no-leaked-tracer", path="E.last_state", match="must be pure")


def test_step_that_reads_a_leaked_tracer_is_reported_as_a_leak():
    class E(Walk):
        def reward(self, state):
            if not hasattr(self, "scale"):
                self.scale = state.pos * 0.0 + 1.0  # a tracer kept from the first trace
            return -jnp.abs(state.pos) * self.scale

    expect(E(), "no-leaked-tracer")


def test_reset_must_return_obs_and_state():
    class E(Walk):
        def reset_env(self, key, params):
            obs, state = super().reset_env(key, params)
            return obs, state, {}

    expect(E(), "reset-structure", match="tuple of length 3")


def test_step_must_return_six_values():
    class E(Walk):
        def step_env(self, key, state, action, params):
            obs, state, reward, terminated, truncated, info = super().step_env(key, state, action, params)
            return obs, state, reward, terminated | truncated, info  # the old Gym API

    expect(E(), "step-structure", match="length 5")


def test_sampled_action_must_lie_in_its_space():
    class Leaky(spaces.Discrete):
        def sample(self, key, batch_shape=()):
            return super().sample(key, batch_shape) + self.n  # always out of range

    class E(Walk):
        def action_space(self, params=None):
            return Leaky(2)

    expect(E(), "action-sample", path="action")


def test_obs_structure_must_match_the_space():
    class E(Walk):
        def obs(self, state):
            return {"pos": state.pos[None]}

    expect(E(), "obs-structure", path="obs", match="['pos']")


def test_obs_dtype_must_be_allowed():
    class E(Walk):
        def obs(self, state):
            return {"pos": state.pos[None], "t": state.t > 0}

    expect(E(), "obs-dtype", path="obs['t']", match="bool")


def test_obs_dtype_must_match_its_space():
    class E(Walk):
        def obs(self, state):
            return {"pos": state.pos[None], "t": state.t.astype(jnp.float32)}

    expect(E(), "obs-dtype", path="obs['t']", match="int32")


def test_obs_shape_must_match_its_space():
    class E(Walk):
        def obs(self, state):
            return {"pos": state.pos, "t": state.t}

    expect(E(), "obs-shape", path="obs['pos']", match="expected (1,)")


def test_obs_out_of_space_on_reset():
    class E(Walk):
        def observation_space(self, params=None):
            return spaces.Dict({"pos": spaces.Box(-0.1, 0.1, (1,)), "t": spaces.Box(0, 2**30, (), np.int32)})

    expect(E(), "obs-in-space", path="obs['pos']", match="after reset")


def test_obs_out_of_space_along_the_rollout():
    class E(Walk):
        def observation_space(self, params=None):
            return spaces.Dict({"pos": spaces.Box(-1.0, 1.0, (1,)), "t": spaces.Box(0, 5, (), np.int32)})

    err = expect(E(), "obs-in-space", path="obs['t']", match="along the rollout (step 5, env 0)")
    assert "[6]" in str(err) or "6 along" in str(err)


def test_structure_must_be_stable():
    @struct.dataclass
    class PhaseState(WalkState):
        phase: int = struct.field(pytree_node=False, default=0)

    class E(Walk):
        def reset_env(self, key, params):
            obs, state = super().reset_env(key, params)
            return obs, PhaseState(state.pos, state.t)

        def next_state(self, state, pos):
            return PhaseState(pos, state.t + 1, phase=state.phase + 1)  # static data changes every step

    expect(E(), "structure-stable", path="state.phase")


def test_leaf_shape_must_be_stable():
    class E(Walk):
        def next_state(self, state, pos):
            return WalkState(pos, jnp.stack([state.t + 1]))

        def obs(self, state):
            return {"pos": state.pos[None], "t": jnp.reshape(state.t, ())}

    expect(E(), "shape-stable", path="state.t", match="shape () after reset but (1,) after step")


def test_leaf_dtype_must_be_stable():
    class E(Walk):
        def next_state(self, state, pos):
            return WalkState(pos, (state.t + 1).astype(jnp.float32))

        def obs(self, state):
            return {"pos": state.pos[None], "t": state.t.astype(jnp.int32)}

        def info(self, state, params):
            return {"t": state.t.astype(jnp.int32)}

    expect(E(), "dtype-stable", path="state.t", match="int32 after reset but float32 after step")


def test_reward_dtype():
    class E(Walk):
        def reward(self, state):
            return state.t

    expect(E(), "reward-dtype", path="reward", match="int32")


def test_reward_shape_single_agent():
    class E(Walk):
        def reward(self, state):
            return -jnp.abs(state.pos)[None]

    expect(E(), "reward-shape", path="reward", match="a float32 scalar")


def test_flags_must_be_bool():
    class E(Walk):
        def step_env(self, key, state, action, params):
            out = list(super().step_env(key, state, action, params))
            out[3] = out[3].astype(jnp.int32)
            return tuple(out)

    expect(E(), "flag-dtype", path="terminated", match="int32, expected bool")


def test_flags_must_be_scalars():
    class E(Walk):
        def step_env(self, key, state, action, params):
            out = list(super().step_env(key, state, action, params))
            out[4] = jnp.zeros((1,), bool)
            return tuple(out)

    expect(E(), "flag-shape", path="truncated")


def test_info_must_be_a_flat_dict_of_arrays():
    class E(Walk):
        def info(self, state, params):
            return {"t": state.t, "nested": {"pos": state.pos}}

    expect(E(), "info-structure", path="info['nested']", match="flat dict")


def test_info_keys_must_not_change_with_params():
    class E(Walk):
        def info(self, state, params):
            extra = {"debug_pos": state.pos} if params.verbose else {}
            return {"t": state.t, **extra}

    check_env(E(), **SMALL)  # the default params alone are fine
    expect(E(), "info-stable", path="info['debug_pos']", params=WalkParams(verbose=True))


def test_weak_typed_state_leaf_retraces():
    class E(Walk):
        def reset_env(self, key, params):
            obs, state = super().reset_env(key, params)
            state = state.replace(t=jnp.asarray(0))  # weakly typed int32
            return self.obs(state), state

        def next_state(self, state, pos):
            return WalkState(pos, (state.t + 1).astype(jnp.int32))  # strongly typed int32

    expect(E(), "retrace", path="state.t", match="weakly typed after reset but strongly typed after step")


def test_retrace_can_be_skipped():
    class E(Walk):
        def reset_env(self, key, params):
            obs, state = super().reset_env(key, params)
            return obs, state.replace(t=jnp.asarray(0))

        def next_state(self, state, pos):
            return WalkState(pos, (state.t + 1).astype(jnp.int32))

    assert "retrace" in check_env(E(), skip=["retrace"], **SMALL).skipped


def _host_noise(x):
    return np.float32(np.random.default_rng().uniform(-0.05, 0.05))


class HostNoise(Walk):
    """Draws its noise on the host through a callback: non-deterministic for a fixed key."""

    def reward(self, state):
        noise = jax.pure_callback(_host_noise, jax.ShapeDtypeStruct((), jnp.float32), state.pos)
        return -jnp.abs(state.pos) + noise


def test_callback_that_does_not_batch_fails_vmap():
    expect(HostNoise(), "vmap", match="pure_callback")


class BatchedHostNoise(Walk):
    def reward(self, state):
        noise = jax.pure_callback(
            _host_noise, jax.ShapeDtypeStruct((), jnp.float32), state.pos, vmap_method="sequential"
        )
        return -jnp.abs(state.pos) + noise


def test_host_callbacks_are_rejected():
    expect(BatchedHostNoise(), "no-callbacks", match="pure_callback")


def test_debug_print_is_a_host_callback():
    class E(Walk):
        def reward(self, state):
            jax.debug.print("pos {}", state.pos)
            return -jnp.abs(state.pos)

    expect(E(), "no-callbacks", match="debug")


def test_host_randomness_is_not_deterministic():
    expect(BatchedHostNoise(), "deterministic", path="reward", match="same compiled rollout", skip=["no-callbacks"])


def test_numpy_randomness_at_trace_time_is_not_deterministic():
    class E(Walk):
        def reward(self, state):
            # drawn once per trace: each compilation bakes in another constant
            return -jnp.abs(state.pos) + np.float32(np.random.default_rng().uniform(0.0, 1.0))

    expect(E(), "deterministic", path="reward", match="trace time")


def test_params_that_cannot_be_vmapped():
    @jax.custom_batching.custom_vmap
    def scale(x, noise):
        return x * noise

    @scale.def_vmap
    def _scale_vmap(axis_size, in_batched, x, noise):
        if in_batched[1]:
            raise NotImplementedError("noise must be shared by the batch")
        return x * noise, in_batched[0]

    class E(Walk):
        def step_env(self, key, state, action, params):
            out = super().step_env(key, state, action, params)
            return (out[0], out[1], scale(out[2], params.noise), *out[3:])

    expect(E(), "params-vmap", match="noise must be shared")
    assert "params-vmap" in check_env(E(), skip=["params-vmap"], **SMALL).skipped


def test_non_finite_reward():
    class E(Walk):
        def reward(self, state):
            return jnp.where(state.t == 4, jnp.inf, -jnp.abs(state.pos)).astype(jnp.float32)

    expect(E(), "reward-finite", path="reward", match="reward inf at (step 3, env 0)")


def test_stochastic_env_that_ignores_its_key():
    class E(Walk):
        def noise_key(self, key):
            return jax.random.key(0)

    expect(E(), "key-sensitivity", match="does step ignore its key")


# ---- multi-agent shape rules --------------------------------------------------------------------


@struct.dataclass
class DuelState:
    pos: jax.Array  # float32[2]: each agent's position
    t: jax.Array  # int32[]


class Duel(Environment):
    """Two agents race on [0, 1]: action 1 advances 0.1, 0 stays; the first to reach 1 ends the
    episode; rewards +1/-1 to winner/loser at the end (0 on a tie), 0 before; obs float32[2, 2]
    (own position, other's position)."""

    traits = Traits(num_agents=2, chance="deterministic", utility="zero_sum", reward_style="terminal")

    def reset_env(self, key, params):
        state = DuelState(jnp.zeros((2,), jnp.float32), jnp.zeros((), jnp.int32))
        return self.obs(state), state

    def step_env(self, key, state, action, params):
        pos = jnp.minimum(state.pos + 0.1 * action.astype(jnp.float32), 1.0)
        state = DuelState(pos, state.t + 1)
        done = jnp.any(pos >= 1.0)
        lead = jnp.sign(pos - pos[::-1]).astype(jnp.float32)
        reward = jnp.where(done, lead, 0.0)
        return self.obs(state), state, self.shape_reward(reward), done, jnp.zeros((), bool), {}

    def shape_reward(self, reward):
        return reward

    def obs(self, state):
        return jnp.stack([state.pos, state.pos[::-1]], axis=1)

    def observation_space(self, params=None):
        return spaces.Box(0.0, 1.0, (2,))

    def action_space(self, params=None):
        return spaces.Discrete(2)


def test_multi_agent_env_passes():
    report = check_env(Duel(), num_steps=30, num_envs=4)
    assert report.terminated > 0  # random runners finish within 30 steps
    assert "key-sensitivity" not in report.rules


def test_multi_agent_reward_needs_an_agent_axis():
    class E(Duel):
        def shape_reward(self, reward):
            return reward[0]

    expect(E(), "reward-shape", path="reward", match="float32[2] (one per agent)")


def test_multi_agent_obs_needs_an_agent_axis():
    class E(Duel):
        def obs(self, state):
            return state.pos

    expect(E(), "obs-shape", path="obs", match="leading axis of 2 agents")


def test_multi_agent_flags_are_episode_level():
    class E(Duel):
        def step_env(self, key, state, action, params):
            out = list(super().step_env(key, state, action, params))
            out[3] = out[1].pos >= 1.0
            return tuple(out)

    expect(E(), "flag-shape", path="terminated", match="per episode")


# ---- turn-based games: legal actions, current player, explicit chance ------------------------------


@struct.dataclass
class TakeState:
    left: jax.Array  # int32[]: tokens left (3 at the start)
    player: jax.Array  # int32[]: the agent to move
    over: jax.Array  # bool[]
    last: jax.Array  # int32[2]: the joint action of the last step (only a broken variant reads it)


class Take(Environment):
    """Two agents alternately take 1 (action 0) or 2 (action 1) of 3 tokens; taking the last wins.
    Taking more than are left is illegal (ends the game: mover -1, other +1)."""

    traits = Traits(num_agents=2, dynamics="sequential", chance="deterministic", utility="zero_sum",
                    reward_style="terminal", action_style="full_action_set")

    def start(self, key):
        return jnp.int32(3)

    def reset_env(self, key, params):
        state = TakeState(self.start(key), jnp.int32(0), jnp.bool_(False), jnp.zeros(2, jnp.int32))
        return self.obs(state), state

    def step_env(self, key, state, action, params):
        move = self.move(state, action)
        legal = self.legal(state, move)
        left = state.left - jnp.where(legal, move + 1, 0)
        won = legal & (left == 0)
        r = jnp.where(legal, jnp.where(won, 1.0, 0.0), -1.0)
        reward = jnp.where(jnp.arange(2) == state.player, r, -r).astype(jnp.float32)
        state = TakeState(left, 1 - state.player, ~legal | won, state.last)
        return self.obs(state), state, reward, state.over, jnp.bool_(False), self.info(state, legal)

    def move(self, state, action):
        return action[state.player]

    def legal(self, state, move):
        return (move >= 0) & (move <= 1) & (move + 1 <= state.left) & ~state.over

    def info(self, state, legal):
        return {"illegal_action": ~legal}

    def legal_action_mask(self, state, params=None):
        row = (jnp.arange(2) + 1 <= state.left) & ~state.over
        return ((jnp.arange(2) == state.player)[:, None] & row[None, :])

    def current_player(self, state, params=None):
        return state.player

    def obs(self, state):
        return {"observation": jnp.broadcast_to(state.left, (2,)), "action_mask": self.legal_action_mask(state).astype(jnp.uint8)}

    def observation_space(self, params=None):
        return spaces.Dict({"observation": spaces.Box(-1, 3, (), np.int32), "action_mask": spaces.Box(0, 1, (2,), np.uint8)})

    def action_space(self, params=None):
        return spaces.Discrete(2)


class TakeChance(Take):
    """Take, where chance first sets the tokens: outcome o -> 2 + o tokens, probabilities [0.25, 0.75]."""

    traits = Traits(num_agents=2, dynamics="sequential", chance="explicit_stochastic", utility="zero_sum",
                    reward_style="terminal", action_style="full_action_set")
    PROBS = (0.25, 0.75)

    def start(self, key):
        return jnp.int32(-1)  # -1: chance to deal

    def is_chance_node(self, state, params=None):
        return state.left < 0

    def chance_outcomes(self, state, params=None):
        return jnp.where(self.is_chance_node(state), jnp.asarray(self.PROBS, jnp.float32), 0.0)

    def apply_chance(self, state, outcome, params=None):
        check_chance_outcome(self, state, outcome, params)
        return self.deal(state, outcome)

    def deal(self, state, outcome):
        return state.replace(left=2 + outcome)

    def draw(self, key, state):
        return jax.random.categorical(key, jnp.log(jnp.asarray(self.PROBS))).astype(jnp.int32)

    def step_env(self, key, state, action, params):
        chance = self.is_chance_node(state)
        outcome = self.draw(key, state)
        dealt = self.deal(state, outcome)
        obs, moved, reward, terminated, truncated, info = super().step_env(key, state, action, params)
        state = jax.tree.map(lambda c, m: jnp.where(chance, c, m), dealt, moved)
        info = {"illegal_action": info["illegal_action"] & ~chance, "chance_outcome": jnp.where(chance, outcome, -1)}
        reward = jnp.where(chance, 0.0, reward).astype(jnp.float32)
        return self.obs(state), state, reward, state.over, truncated, info

    def legal_action_mask(self, state, params=None):
        return super().legal_action_mask(state) & ~self.is_chance_node(state)

    def legal(self, state, move):
        return super().legal(state, move) & ~self.is_chance_node(state)


def test_turn_based_envs_pass():
    for env in (Take(), TakeChance(), jaxenvs.wrappers.AutoReset(TakeChance())):
        report = check_env(env, **SMALL)
        assert {"mask-structure", "mask-step", "mask-mover", "current-player", "non-mover-ignored"} <= set(report.rules)
        assert ("chance-outcomes" in report.rules) == isinstance(env.unwrapped, TakeChance)
    assert "mask-step" not in check_env(Walk(), **SMALL).rules


def test_traits_implemented_mask_without_trait():
    class E(Take):
        traits = Traits(num_agents=2, dynamics="sequential", chance="deterministic")

    expect(E(), "traits-implemented", match="defines legal_action_mask but traits.action_style is 'minimal'")


def test_traits_implemented_sequential_without_current_player():
    class E(Walk):
        traits = Traits(chance="stochastic", dynamics="sequential")

    expect(E(), "traits-implemented", match="does not define current_player")


def test_mask_structure_obs_without_the_mask():
    class E(Take):
        def obs(self, state):
            return {"observation": jnp.broadcast_to(state.left, (2,)), "mask": self.legal_action_mask(state).astype(jnp.uint8)}

        def observation_space(self, params=None):
            return spaces.Dict({"observation": spaces.Box(-1, 3, (), np.int32), "mask": spaces.Box(0, 1, (2,), np.uint8)})

    expect(E(), "mask-structure", path="obs", match="'observation' and 'action_mask'")


def test_mask_structure_float_mask():
    class E(Take):
        def legal_action_mask(self, state, params=None):
            return super().legal_action_mask(state).astype(jnp.float32)

        def obs(self, state):
            return {"observation": jnp.broadcast_to(state.left, (2,)), "action_mask": super().legal_action_mask(state).astype(jnp.uint8)}

    expect(E(), "mask-structure", match="legal_action_mask returned float32[2, 2], expected bool[2, 2]")


def test_mask_structure_obs_mask_of_another_state():
    class E(Take):
        def obs(self, state):  # the mask of the state before the move: stale
            before = state.replace(player=1 - state.player)
            return {"observation": jnp.broadcast_to(state.left, (2,)), "action_mask": self.legal_action_mask(before).astype(jnp.uint8)}

    expect(E(), "mask-structure", path="obs['action_mask']", match="after reset")


def test_mask_autoreset_final_obs_mask_of_another_state():
    class E(Take):
        def obs(self, state):  # at the end the observation still offers the moves of a live game
            live = state.replace(over=jnp.bool_(False), left=jnp.where(state.over, 3, state.left))
            return {"observation": jnp.broadcast_to(state.left, (2,)), "action_mask": self.legal_action_mask(live).astype(jnp.uint8)}

    expect(jaxenvs.wrappers.AutoReset(E()), "mask-autoreset", path="info['final_obs']['action_mask']")


def test_current_player_out_of_range():
    class E(Take):
        def current_player(self, state, params=None):
            return state.player - 1  # -1 for agent 0: wraps silently when used as an index

    expect(E(), "current-player", match="current_player is -1")


def test_mask_mover_non_mover_may_move():
    class E(Take):
        def legal_action_mask(self, state, params=None):
            row = (jnp.arange(2) + 1 <= state.left) & ~state.over
            return jnp.broadcast_to(row, (2, 2))

    expect(E(), "mask-mover", match="is not to move")


def test_mask_step_illegal_move_not_reported():
    class E(Take):
        def legal(self, state, move):  # taking 2 of 1 passes as legal
            return (move >= 0) & (move <= 1) & ~state.over

    expect(E(), "mask-step", path="info['illegal_action']", match="step says illegal=False, the mask says illegal=True")


def test_non_mover_ignored_state_records_the_joint_action():
    class E(Take):
        def step_env(self, key, state, action, params):
            out = list(super().step_env(key, state, action, params))
            out[1] = out[1].replace(last=action)  # keeps the non-mover's row
            return tuple(out)

    # the base class keeps only what it read; this one remembers the whole joint action
    expect(E(), "non-mover-ignored", path="state.last")


def test_chance_outcomes_must_sum_to_one():
    class E(TakeChance):
        def chance_outcomes(self, state, params=None):
            return jnp.where(self.is_chance_node(state), jnp.asarray([0.25, 0.5], jnp.float32), 0.0)

    expect(E(), "chance-outcomes", match="sum to 1")


def test_chance_outcomes_must_match_steps_draws():
    class E(TakeChance):
        def draw(self, key, state):  # uniform, where chance_outcomes says [0.25, 0.75]
            return jax.random.bernoulli(key).astype(jnp.int32)

    expect(E(), "chance-outcomes", match="do not follow chance_outcomes")


def test_chance_outcomes_apply_chance_must_match_step():
    class E(TakeChance):
        def apply_chance(self, state, outcome, params=None):
            return state.replace(left=3 - outcome)

        def step_env(self, key, state, action, params):
            out = list(super().step_env(key, state, action, params))
            chance = self.is_chance_node(state)
            out[1] = jax.tree.map(lambda a, b: jnp.where(chance, a, b), state.replace(left=2 + out[5]["chance_outcome"]), out[1])
            return tuple(out)

    expect(E(), "chance-outcomes", match="apply_chance")


def test_apply_chance_must_refuse_impossible_outcomes():
    # A/A: the faithful env passes (TakeChance in test_turn_based_envs_pass, KuhnPoker in
    # tests/test_kuhn_poker.py); each planted miss is caught. The plants check concrete arguments
    # only (traced ones, as in check_chance's jitted draws, go through).
    def planted(check):
        class E(TakeChance):
            def apply_chance(self, state, outcome, params=None):
                if is_concrete((state, outcome)):
                    check(self, state, int(outcome))
                return self.deal(state, outcome)

        return E()

    def node_only(env, state, o):
        if not bool(env.is_chance_node(state)):
            raise ValueError("not a chance node")

    def range_only(env, state, o):
        if not 0 <= o < 2:
            raise ValueError("out of range")

    def refuses_all(env, state, o):
        raise ValueError("never")

    def wrong_error(env, state, o):
        {0: 0, 1: 1}[o]

    expect(planted(lambda *a: None), "apply-chance", match="accepted outcome -1 (out of range) at a chance node")
    expect(planted(node_only), "apply-chance", match="accepted outcome -1")
    expect(planted(range_only), "apply-chance", match="accepted outcome 0 at a decision state")
    expect(planted(refuses_all), "apply-chance", match="env.apply_chance(state, 0) at a chance node (probability 0.25) raised ValueError: never")
    expect(planted(wrong_error), "apply-chance", match="raised KeyError, expected a ValueError")


def test_every_rule_has_a_test_here():
    import inspect
    import sys

    source = inspect.getsource(sys.modules[__name__])
    untested = [r for r in RULES if f'"{r}"' not in source.split("def test_every_rule_has_a_test_here")[0]]
    # 'scan' guards failures that only a lax.scan raises; every such failure known to us is caught
    # earlier (dtype-stable, shape-stable, structure-stable, vmap).
    assert untested == ["scan"]


def test_a_gymnasium_env_is_refused_with_the_checker_that_fits_it():
    gymnasium = pytest.importorskip("gymnasium")
    with pytest.raises(TypeError, match=r"got gymnasium\.\S+TimeLimit, a gymnasium env\. Check it with "
                       r"gymnasium\.utils\.env_checker\.check_env, or compare a jaxenvs port with it: "
                       r"jaxenvs\.testing\.verify_port"):
        check_env(gymnasium.make("CartPole-v1"))
