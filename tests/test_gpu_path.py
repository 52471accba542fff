"""Programs made for the GPU, checked on the CPU (`jaxenvs._backend`).

Each program the library and the trainer run every step or every update is traced twice on this
CPU: with the CPU's code paths and with a GPU's (`building_for("gpu")`), both compiled by XLA:CPU
(cheapest compile). The GPU build must hold no host round trip (`host_round_trips`: no while loop
whose trip count depends on data, no conditional on a computed value, no callback or host
transfer), and both builds, run here, must give the same values bit for bit: every CPU-only trick
is gated by the backend and changes nothing but the cost. The analyser itself is held to planted
round trips it must find, and to loops and branches it must not flag."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs import _backend, prng
from jaxenvs._backend import building_for, host_round_trips
from jaxenvs.vector import VectorEnv, default_reset_capacity

FAST = {"xla_backend_optimization_level": 0}


def compiled_for(name, fn, *args, fast=True):
    """``fn``'s program (a function or a jitted one) traced with ``name``'s code paths, compiled here
    (``fast=False`` for a function jitted with its own options)."""
    with building_for(name):
        jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
        return jitted.lower(*args).compile(FAST) if fast else jitted.lower(*args).compile()


def both_ways(fn, *args, build=None, static=(), fast=True):
    """``{"cpu" | "gpu": (outputs computed here, round trips)}``; ``build()`` (inside each
    selection) makes ``fn`` when what it is made of reads the backend at construction; ``static``:
    the positions of static arguments; ``fast=False`` for a function jitted with its own options."""
    out = {}
    for name in ("cpu", "gpu"):
        with building_for(name):
            f = build() if build is not None else fn
            jitted = f if hasattr(f, "lower") else jax.jit(f)
            lowered = jitted.lower(*args)
            compiled = lowered.compile(FAST) if fast else lowered.compile()
        dynamic = [a for i, a in enumerate(args) if i not in static]
        out[name] = (jax.device_get(compiled(*dynamic)), host_round_trips(compiled))
    return out


def _host(x):
    if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    return np.asarray(x)


def assert_same(a, b, what):
    assert jax.tree.structure(a) == jax.tree.structure(b), what
    for i, (x, y) in enumerate(zip(jax.tree.leaves(a), jax.tree.leaves(b))):
        x, y = _host(x), _host(y)
        assert x.dtype == y.dtype and x.shape == y.shape, f"{what}: leaf {i} {x.dtype}{x.shape} vs {y.dtype}{y.shape}"
        assert np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"), f"{what}: leaf {i} differs between the builds"


def assert_gpu_clean(result, what):
    trips = result["gpu"][1]
    assert not trips, f"{what} built for a GPU waits on the host: " + "; ".join(map(str, trips))
    assert_same(result["cpu"][0], result["gpu"][0], what)


# ---- the analyser -------------------------------------------------------------------------------
def test_the_analyser_finds_planted_round_trips():
    def planted(x):
        y = jax.lax.cond(x.sum() > 0, lambda v: v + 1, lambda v: v * 2, x)          # on data
        z = jax.lax.while_loop(lambda v: v.sum() < 100.0, lambda v: v * 2 + 1, y)  # trips depend on data
        w = jax.pure_callback(lambda v: np.asarray(v) * 3, jax.ShapeDtypeStruct((4,), jnp.float32), z)
        return jax.lax.switch(jnp.argmax(x), [lambda: w, lambda: -w, lambda: w * w, lambda: w + 2])

    trips = host_round_trips(jax.jit(planted).lower(jnp.ones(4)).compile(FAST))
    kinds = sorted(t.kind for t in trips)
    assert kinds == ["callback", "conditional", "conditional", "while"], trips
    assert sorted(t.source.rsplit("/", 1)[-1] for t in trips) == ["cond", "cond", "pure_callback", "while"], trips  # a switch is a cond
    with pytest.raises(AssertionError, match="waits on the host"):
        assert_gpu_clean({"gpu": (None, trips), "cpu": (None, None)}, "planted")
    # the same text read twice gives the same answer; a string works as well as a Compiled
    assert host_round_trips(jax.jit(planted).lower(jnp.ones(4)).compile(FAST).as_text()) == trips


def test_the_analyser_leaves_counted_loops_and_static_branches_alone():
    def clean(x):
        a = jax.lax.fori_loop(0, 7, lambda i, v: v * 1.5 + jnp.sin(v), x)
        b, ys = jax.lax.scan(lambda c, v: (c + v, c * v), 0.0, a)
        c = jax.lax.cond(True, lambda: b, lambda: -b)  # a constant predicate: folded away
        d = jax.vmap(lambda v: jax.lax.cond(v > 0, lambda: v, lambda: -v))(x)  # a select under vmap
        return c, ys, d, jax.random.bits(jax.random.key(0), (8,)), jnp.sort(x)

    assert host_round_trips(jax.jit(clean).lower(jnp.ones(4)).compile(FAST)) == []


def test_the_gated_cond_and_while_are_branch_free_off_the_cpu_with_the_same_values():
    def program(x):
        y = _backend.cond(x.sum() > 2.0, lambda v: v * 3.0, lambda v: v - 1.0, x)
        # doubles until above 50, at most 12 times (the caller's bound)
        return _backend.bounded_while(lambda c: (c[0] < 12) & (c[1].max() < 50.0),
                                      lambda c: (c[0] + 1, c[1] * 2.0), (jnp.int32(0), y), 12)

    for x in (jnp.ones(4), jnp.full(4, 0.25), jnp.full(4, 1e-6)):
        result = both_ways(program, x)
        assert sorted(t.kind for t in result["cpu"][1]) == ["conditional", "while"]
        assert_gpu_clean(result, "the gated cond and while")
    assert int(result["gpu"][0][0]) == 12  # the bound was reached: the bound, not the condition, stopped it


def test_building_for_selects_and_restores_the_platform():
    assert _backend.platform() == jax.default_backend()
    with building_for("gpu"):
        assert _backend.platform() == "gpu" and not _backend.on_cpu()
        with building_for("cpu"):
            assert _backend.on_cpu()
        assert _backend.platform() == "gpu"
    assert _backend.platform() == jax.default_backend()
    with pytest.raises(ValueError, match="'cpu', 'gpu' or 'tpu', got 'cuda'"):
        with building_for("cuda"):
            pass


# ---- the gated functions, both ways --------------------------------------------------------------
def test_prng_and_the_minibatch_shuffle_give_the_same_values_on_both_paths():
    from jaxenvs.train.permutation import minibatch_permutation

    def draws(key):
        k1, k2 = prng.split(key)
        return (prng.bits(k1, (37,)), jax.random.key_data(prng.split(k2, 5)), prng.uniform(k1, (9,), -2.0, 3.0),
                prng.normal(k2, (11,)), minibatch_permutation(key, 1000), minibatch_permutation(k1, 3))

    result = both_ways(draws, jax.random.key(3))
    assert_gpu_clean(result, "prng and minibatch_permutation")
    assert np.array_equal(result["cpu"][0][4], np.asarray(jax.random.permutation(jax.random.key(3), 1000)))
    with building_for("gpu"):  # the gates do select another path
        assert prng._threefry_data(jax.random.key(0)) is None
    assert prng._threefry_data(jax.random.key(0)) is not None


def test_vector_env_compacted_auto_reset_same_values_and_no_host_wait():
    assert default_reset_capacity(1024, "gpu") == 1024 and default_reset_capacity(1024, "cpu") == 64
    with building_for("gpu"):
        assert VectorEnv(jaxenvs.make("GridWorld-v0"), 256).reset_capacity == 256
    env = jaxenvs.make("GridWorld-v0", max_episode_steps=3)  # every env ends every 3 steps
    vec = VectorEnv(env, 16, reset_capacity=4)

    def steps(key):
        obs, state = vec.reset(key)

        def one(state, k):
            a = jax.random.randint(k, (16,), 0, 4)
            obs, state, reward, term, trunc, info = vec.step(k, state, a)
            return state, (obs, reward, term, trunc, info["final_obs"])

        return jax.lax.scan(one, state, jax.random.split(key, 7))

    result = both_ways(steps, jax.random.key(1))
    assert [t.kind for t in result["cpu"][1]] == ["conditional"]  # the compaction's branch, on a CPU only
    assert_gpu_clean(result, "VectorEnv.step (reset_capacity=4 of 16)")
    done = result["cpu"][0][1][2] | result["cpu"][0][1][3]
    assert (done.sum(axis=1) > 4).any() and ((done.sum(axis=1) > 0) & (done.sum(axis=1) <= 4)).any()  # both branches taken


# ---- the trainer -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def point_ppo():
    """PPO on PointEnv with a time limit of 5 (truncations feed `_next_values`' branch), 2 updates."""
    from jaxenvs.train.configs import get_config
    from jaxenvs.train.trainers import make_trainer

    config = get_config("PointEnv-v0", env_kwargs={"max_episode_steps": 5}, num_envs=4, num_steps=8,
                        total_timesteps=64, hidden_sizes=(8,), num_minibatches=2)
    trainer = make_trainer(config)
    runner = jax.jit(jax.vmap(trainer._init), compiler_options=FAST)(jax.random.split(jax.random.key(0), 1))
    return trainer, runner


def test_the_trainers_chunk_program_same_values_and_no_host_wait(point_ppo):
    from jaxenvs.train.app.chunks import ChunkProgram

    trainer, runner = point_ppo
    hp = trainer.config.hparams()
    run = types.SimpleNamespace(trainer=trainer, mesh=None, hparams=hp)
    out = {}
    for name in ("cpu", "gpu"):
        with building_for(name):
            # chunks of 2 or 1 update: the scan's skip of the second step (a cond on n)
            compiled = ChunkProgram._lower_chunk_program(run, [2, 1], runner).compile(FAST)
        out[name] = (jax.device_get(compiled(runner, hp, np.int32(1))), host_round_trips(compiled))
    # on a CPU the skip's cond stays (its predicate is the seeds' own); _next_values' is a select
    # under the vmap over seeds (values compared below all the same)
    assert [t.kind for t in out["cpu"][1]] == ["conditional"]
    assert_gpu_clean(out, "the chunk program (PPO, PointEnv)")


def test_rollouts_and_the_episodes_evaluation_same_values_and_no_host_wait(point_ppo):
    from jaxenvs.train.episodes import _episode_fn  # a jaxenvs.rollout.rollout of the greedy policy

    trainer, runner = point_ppo
    params = jax.tree.map(lambda x: x[0], runner.params)
    result = both_ways(_episode_fn(trainer, False, 8).jitted, params, jax.random.key(5))
    assert_gpu_clean(result, "the episodes' evaluation (jaxenvs.rollout.rollout of the greedy policy)")


def test_trpo_line_search_same_values_and_its_update_no_host_wait():
    from jaxenvs.train.configs import get_config
    from jaxenvs.train.trainers import make_trainer
    from jaxenvs.train.trpo import line_search

    theta, step = jnp.array([1.0, -2.0, 0.5]), jnp.array([0.8, -0.4, 0.2])
    for max_kl in (0.05, 1e-6):  # accepted after a few backtracks; never accepted (all 10 tried)
        result = both_ways(lambda t, s: line_search(lambda x: jnp.sum((x - 0.3) ** 2), lambda x: jnp.sum((x - t) ** 2),
                                                    t, s, jnp.sum((t - 0.3) ** 2), max_kl, 0.5, 10), theta, step)
        assert [t.kind for t in result["cpu"][1]] == ["while"]  # the search stops early on a CPU
        assert_gpu_clean(result, "TRPO's line search")
    assert not result["cpu"][0][1]["accepted"]
    trainer = make_trainer(get_config("PointEnv-v0", algo="trpo", num_envs=4, num_steps=8, total_timesteps=64,
                                      hidden_sizes=(8,)))
    runner = jax.eval_shape(trainer._init, jax.random.key(0))
    trips = host_round_trips(compiled_for("gpu", lambda r: trainer._run_updates(r, None, 1), runner))
    assert trips == [], f"TRPO's update built for a GPU waits on the host: {trips}"


@pytest.fixture(scope="module")
def ttt_ppo():
    from jaxenvs.train.configs import get_config
    from jaxenvs.train.trainers import make_trainer

    config = get_config("TicTacToe-v0", num_envs=4, num_steps=4, total_timesteps=32, hidden_sizes=(8,),
                        torso="mlp", match_games=2, num_minibatches=1)
    return make_trainer(config)


def test_a_game_update_with_its_matches_has_no_host_wait(ttt_ppo):
    runner = jax.eval_shape(ttt_ppo._init, jax.random.key(0))
    trips = host_round_trips(compiled_for("gpu", lambda r: ttt_ppo._run_updates(r, None, 1), runner))
    assert trips == [], f"PPO's update on TicTacToe (self-play, per-update matches) waits on the host: {trips}"


def test_the_games_evaluation_same_values_and_no_host_wait(ttt_ppo):
    from jaxenvs.games import random_legal
    from jaxenvs.train.policy import _versus_program

    params = jax.jit(ttt_ppo._init, compiler_options=FAST)(jax.random.key(0)).params
    result = both_ways(None, params, jax.random.key(5), build=lambda: _versus_program(ttt_ppo, random_legal, 8, 1000, True))
    assert {t.kind for t in result["cpu"][1]} == {"while", "conditional"}  # the seat loop's, on a CPU only
    assert_gpu_clean(result, "the games' evaluation (the seat loop against random-legal play)")
    plies = np.asarray(result["cpu"][0][0]["plies"])
    assert (plies >= 5).all() and (plies <= 9).all() and len(set(plies.tolist())) > 1  # games of several lengths


# ---- the games' search and look-ahead ----------------------------------------------------------
def _one_obs(env):
    return jax.tree.map(lambda x: x[0], env.reset(jax.random.key(0))[0])


def test_the_games_search_adds_no_host_wait_to_mctx_own_loops():
    mctx = pytest.importorskip("mctx")
    from jaxenvs.games.search import lookahead_policy, search_policy

    env = jaxenvs.make("TicTacToe-v0", autoreset=False)
    obs = _one_obs(env)
    ours = compiled_for("gpu", search_policy(env, lambda o: (jnp.zeros(9), jnp.zeros(())), 8), jax.random.key(0), obs)

    def bare(key):  # mctx alone, a model that knows nothing: its own tree descent and backup
        root = mctx.RootFnOutput(prior_logits=jnp.zeros((1, 9)), value=jnp.zeros((1,)), embedding=jnp.zeros((1,)))

        def model(_, rng, action, emb):
            z = jnp.zeros(action.shape)
            return mctx.RecurrentFnOutput(reward=z, discount=z - 1, prior_logits=jnp.zeros((1, 9)), value=z), emb

        return mctx.gumbel_muzero_policy(None, key, root, model, 8).action

    own = sorted(t.kind for t in host_round_trips(compiled_for("gpu", bare, jax.random.key(0))))
    assert own == ["while", "while"]  # mctx's: documented in jaxenvs/games/search.py
    assert sorted(t.kind for t in host_round_trips(ours)) == own
    for game in ("TicTacToe-v0", "ConnectFour-v0"):
        env = jaxenvs.make(game, autoreset=False)
        guard = lookahead_policy(env, lambda k, o: jnp.argmax(o["action_mask"]).astype(jnp.int32), 2)
        trips = host_round_trips(compiled_for("gpu", guard, jax.random.key(0), _one_obs(env)))
        assert trips == [], f"{game} look-ahead: {trips}"


# ---- verify's port programs --------------------------------------------------------------------
def test_verifys_port_programs_same_values_and_no_host_wait():
    from jaxenvs.testing import runs

    env = jaxenvs.make("GridWorld-v0", autoreset=False, max_episode_steps=6)
    params = env.default_params
    policy = runs.default_policy(env.action_space(params), 1, False)
    seed = jax.random.key(2)
    result = both_ways(runs.port_rollout_fn(env, policy, 6, True), params, seed, jnp.int32(0), 8, static=(3,),
                       fast=False, build=lambda: runs.port_rollout_fn(env, policy, 6, True))
    assert_gpu_clean(result, "verify's port rollout")
    alive = result["cpu"][0][1][-1]
    assert 0 < int(alive.sum()) < 8 * 6 and len(set(alive.sum(axis=1).tolist())) > 1  # the loop's stop mattered
    _, states = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(seed, 4), params)
    actions, keys = jnp.arange(4, dtype=jnp.int32), jax.random.split(seed, 4)
    for what, program, args in [("state steps", runs.state_step_fn(env, 3), (params, states, actions, keys)),
                                ("replay", runs.replay_fn(env, 5), (params, states, jnp.zeros((4, 5), jnp.int32), seed)),
                                ("resets", runs.port_reset_fn(env), (params, seed, jnp.int32(0), 4))]:
        trips = host_round_trips(compiled_for("gpu", program, *args, fast=False))
        assert trips == [], f"verify's {what} built for a GPU wait on the host: {trips}"
