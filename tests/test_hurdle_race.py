"""HurdleRace-v0: exact dynamics against a plain-numpy transcription of POSGGym's tutorial model,
reset and jump statistics, rewards/outcomes, the registered env under jit + vmap + scan, rendering
and error messages."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs.envs import hurdle_race as hr
from jaxenvs.envs.hurdle_race import DRAW, JUMP, LOSS, NOT_FINISHED, RUN, WIN, EnvParams, EnvState, HurdleRace

L = 10
SLOTS = ((1, 2), (4, 5), (7, 8))
LAYOUTS = np.array(list(itertools.product(*SLOTS)), np.int32)  # the 8 possible hurdle layouts
SIGMAS = 5.0  # tolerance of every binomial test, in standard errors
# chi-square critical value for 7 degrees of freedom at p = 1e-6 (about a 5-sigma two-sided test)
CHI2_7DF_CRIT = 40.52


# ---- plain-numpy reference: the tutorial's HurdleRaceModel, rule by rule ---------------------
def ref_step(pos, hurdles, actions, uniforms, p=0.9, track_length=L):
    """Returns (next_pos, obs, reward, terminated, outcome) for one step of the tutorial model."""
    hurdles = [int(h) for h in hurdles]
    new = []
    for i in range(2):
        x = int(pos[i])
        a = min(max(int(actions[i]), 0), 1)  # jaxenvs' documented clipping of out-of-range actions
        if a == 0:  # RUN
            if not any(x + 1 == h for h in hurdles):
                x += 1
                if not any(x + 1 == h for h in hurdles):
                    x += 1
            x = min(track_length, x)
        else:  # JUMP
            if not any(x + 1 == h for h in hurdles) or uniforms[i] < p:
                x += 1
        new.append(x)
    obs = [1 if any(h == x + 1 for h in hurdles) else 0 for x in new]
    a0, a1 = new[0] == track_length, new[1] == track_length
    if a0 and a1:
        reward, outcome = [0.0, 0.0], [DRAW, DRAW]
    elif a0:
        reward, outcome = [1.0, -1.0], [WIN, LOSS]
    elif a1:
        reward, outcome = [-1.0, 1.0], [LOSS, WIN]
    else:
        reward, outcome = [0.0, 0.0], [NOT_FINISHED, NOT_FINISHED]
    return new, obs, reward, a0 or a1, outcome


# ---- fixtures --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def env():
    return HurdleRace()


@pytest.fixture(scope="module")
def step_batch(env):
    """jit(vmap(step)) over (key, state, action) with shared params."""
    return jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))


def make_states(pos, hurdles):
    return EnvState(pos=jnp.asarray(pos, jnp.int32), hurdles=jnp.asarray(hurdles, jnp.int32))


# ---- exact dynamics --------------------------------------------------------------------------
def test_traits_and_spaces(env):
    t = env.traits
    assert (t.num_agents, t.dynamics, t.chance, t.information, t.utility, t.reward_style) == (
        2, "simultaneous", "stochastic", "imperfect", "zero_sum", "terminal")
    assert env.agents == ("0", "1")
    assert env.action_space() == jaxenvs.spaces.Discrete(2)
    assert env.observation_space() == jaxenvs.spaces.Discrete(2)


def test_every_single_step_matches_reference(env, step_batch):
    """Every layout x start positions 0..10 x joint action (including out-of-range ones) once."""
    acts = [-3, 0, 1, 2]
    rows = list(itertools.product(range(len(LAYOUTS)), range(L + 1), range(L + 1), acts, acts))
    rows = [r for r in rows if not (r[1] == L and r[2] == L)]
    lay, p0, p1, a0, a1 = (np.array(c) for c in zip(*rows))
    pos = np.stack([p0, p1], 1)
    hurdles = LAYOUTS[lay]
    actions = np.stack([a0, a1], 1).astype(np.int32)
    keys = jax.random.split(jax.random.key(1), len(rows))
    u = np.asarray(jax.vmap(hr.jump_uniforms)(keys))
    obs, st, rew, term, trunc, info = jax.device_get(
        step_batch(keys, make_states(pos, hurdles), actions, env.default_params))
    assert not trunc.any()
    for i in range(len(rows)):
        if pos[i].max() == L:
            # stepping after the end lies outside the tutorial: positions stay capped
            assert (st.pos[i] >= pos[i]).all() and st.pos[i].max() <= L
            continue
        new, o, r, t, out = ref_step(pos[i], hurdles[i], actions[i], u[i])
        assert st.pos[i].tolist() == new, rows[i]
        assert obs[i].tolist() == o and rew[i].tolist() == r and bool(term[i]) == t, rows[i]
        assert info["pos"][i].tolist() == new and info["outcome"][i].tolist() == out, rows[i]
        assert st.hurdles[i].tolist() == hurdles[i].tolist()


def test_random_episodes_match_reference(env):
    """256 episodes from test-drawn layouts, random joint actions, until the first termination."""
    n, T = 256, 40
    rng = np.random.default_rng(0)
    hurdles = LAYOUTS[rng.integers(0, len(LAYOUTS), n)]
    actions = rng.integers(0, 2, (n, T, 2)).astype(np.int32)
    keys = jax.random.split(jax.random.key(2), n * T).reshape(n, T)

    def episode(keys, hurdles, actions):
        def body(state, xs):
            key, a = xs
            obs, state, r, term, _, info = env.step(key, state, a)
            return state, (obs, r, term, info["pos"], info["outcome"], hr.jump_uniforms(key))

        s0 = make_states(jnp.zeros(2), hurdles)
        return jax.lax.scan(body, s0, (keys, actions))[1]

    obs, rew, term, pos, out, u = jax.device_get(jax.jit(jax.vmap(episode))(keys, hurdles, actions))
    seen = {WIN: 0, LOSS: 0, DRAW: 0}
    for e in range(n):
        p = [0, 0]
        for t in range(T):
            p, o, r, done, oc = ref_step(p, hurdles[e], actions[e, t], u[e, t])
            assert (pos[e, t].tolist(), obs[e, t].tolist(), rew[e, t].tolist(), out[e, t].tolist()) == (
                p, o, r, oc), (e, t)
            assert bool(term[e, t]) == done
            assert rew[e, t].sum() == 0.0  # zero-sum on every step
            if done:
                seen[oc[0]] += 1
                break
        else:
            pytest.fail(f"episode {e} did not end within {T} steps")
    # the comparison covered wins of each runner and draws
    assert min(seen.values()) > 0, seen


def test_outcomes_and_rewards(env):
    h = [1, 4, 7]
    cases = [  # (pos, action, next pos, reward, outcome)
        ([9, 9], [RUN, RUN], [10, 10], [0.0, 0.0], [DRAW, DRAW]),
        ([9, 5], [RUN, RUN], [10, 6], [1.0, -1.0], [WIN, LOSS]),
        ([8, 9], [JUMP, JUMP], [9, 10], [-1.0, 1.0], [LOSS, WIN]),
        ([2, 3], [RUN, RUN], [3, 3], [0.0, 0.0], [NOT_FINISHED, NOT_FINISHED]),
    ]
    for pos, a, new, r, out in cases:
        obs, st, rew, term, trunc, info = env.step(jax.random.key(0), make_states(pos, h), jnp.array(a))
        assert st.pos.tolist() == new and rew.tolist() == r and info["outcome"].tolist() == out
        assert bool(term) == (max(new) == L) and not bool(trunc)
        assert rew.dtype == jnp.float32 and float(rew.sum()) == 0.0


def test_run_blocked_by_hurdles_and_capped(env):
    h = [2, 4, 8]
    run = jnp.array([RUN, RUN])
    for pos, new in [([1, 3], [1, 3]), ([0, 2], [1, 3]), ([5, 7], [7, 7]), ([9, 8], [10, 10])]:
        st = env.step(jax.random.key(0), make_states(pos, h), run)[1]
        assert st.pos.tolist() == new, pos


def test_reset_distribution(env):
    n = 20_000
    obs, st = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
        jax.random.split(jax.random.key(3), n), env.default_params)
    hurdles = np.asarray(st.hurdles)
    assert st.pos.dtype == jnp.int32 and obs.dtype == jnp.int32 and hurdles.dtype == np.int32
    assert (np.asarray(st.pos) == 0).all()
    np.testing.assert_array_equal(np.asarray(obs), np.repeat((hurdles[:, :1] == 1).astype(np.int32), 2, 1))
    for j, slot in enumerate(SLOTS):
        assert set(np.unique(hurdles[:, j])) == set(slot)
        k = (hurdles[:, j] == slot[0]).sum()
        assert abs(k - n / 2) < SIGMAS * np.sqrt(n / 4), (j, k)
    # joint layout uniform over the 8 layouts (slots independent): chi-square, 7 dof
    idx = [(LAYOUTS == row).all(1).argmax() for row in hurdles]
    counts = np.bincount(idx, minlength=len(LAYOUTS))
    chi2 = ((counts - n / 8) ** 2 / (n / 8)).sum()
    assert chi2 < CHI2_7DF_CRIT, counts
    # reset-time info has the keys and dtypes of step-time info
    s0 = jax.tree.map(lambda x: x[0], st)
    i0 = env.info(s0)
    i1 = env.step(jax.random.key(0), s0, jnp.array([0, 1]))[-1]
    assert {k: (v.dtype, v.shape) for k, v in i0.items()} == {k: (v.dtype, v.shape) for k, v in i1.items()}
    assert i0["outcome"].tolist() == [NOT_FINISHED, NOT_FINISHED] and i0["pos"].tolist() == [0, 0]


def test_jump_success_rate_and_independence(env):
    """Both runners jump at a hurdle: each succeeds with jump_success_rate, independently; one
    compiled function serves every rate (a params field)."""
    n = 20_000
    traces = []

    def jump(key, p):
        traces.append(1)
        st = make_states([3, 6], [1, 4, 7])
        return env.step(key, st, jnp.array([JUMP, JUMP]), EnvParams(jump_success_rate=p))[1].pos

    f = jax.jit(jax.vmap(jump, in_axes=(0, None)))
    keys = jax.random.split(jax.random.key(4), n)
    for p in (0.9, 0.5):
        pos = np.asarray(f(keys, jnp.float32(p)))
        ok = pos - np.array([3, 6])
        assert set(np.unique(ok)) <= {0, 1}
        for frac, q in [(ok[:, 0].mean(), p), (ok[:, 1].mean(), p), ((ok[:, 0] & ok[:, 1]).mean(), p * p)]:
            assert abs(frac - q) < SIGMAS * np.sqrt(q * (1 - q) / n), (p, frac, q)
    assert len(traces) == 1
    # no hurdle ahead: a JUMP always moves one cell
    free = jax.vmap(lambda k: env.step(k, make_states([2, 5], [1, 4, 7]), jnp.array([JUMP, JUMP]))[1].pos)(keys[:2000])
    assert (np.asarray(free) == [3, 6]).all()


# ---- the registered env ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def made():
    return jaxenvs.make("HurdleRace-v0")


def test_make_jit_vmap_scan(made):
    n, T = 64, 300
    params = made.default_params
    space = made.observation_space(params)
    obs0, st0 = jax.vmap(made.reset, in_axes=(0, None))(jax.random.split(jax.random.key(5), n), params)

    def rollout(obs0, st0, key):
        def body(carry, k):
            obs, st = carry
            ka, ks = jax.random.split(k)
            a = made.action_space(params).sample(ka, (n, 2))
            obs2, st2, r, term, trunc, info = jax.vmap(made.step, in_axes=(0, 0, 0, None))(
                jax.random.split(ks, n), st, a, params)
            in_space = jax.vmap(jax.vmap(space.contains))(obs2).all()
            return (obs2, st2), (in_space, r, term, trunc, info["outcome"], info["final_obs"])

        return jax.lax.scan(body, (obs0, st0), jax.random.split(key, T))

    (obs, st), (in_space, r, term, trunc, outcome, final_obs) = jax.jit(rollout)(obs0, st0, jax.random.key(6))
    assert bool(in_space.all())
    assert jax.tree.map(lambda x: (x.dtype, x.shape), (obs0, st0)) == jax.tree.map(lambda x: (x.dtype, x.shape), (obs, st))
    assert obs.dtype == jnp.int32 and final_obs.dtype == jnp.int32
    assert r.dtype == jnp.float32 and r.shape == (T, n, 2)
    assert term.dtype == jnp.bool_ and trunc.dtype == jnp.bool_
    r, term, outcome = np.asarray(r), np.asarray(term), np.asarray(outcome)
    assert (r.sum(-1) == 0).all()
    assert ((r != 0).any(-1) <= term).all()  # terminal reward only
    assert term.sum() > n  # many episodes finished and restarted
    finished = outcome != NOT_FINISHED
    np.testing.assert_array_equal(finished.any(-1), term)
    np.testing.assert_array_equal(r[term], np.where(outcome[term] == WIN, 1.0, np.where(outcome[term] == LOSS, -1.0, 0.0)))


def test_errors():
    with pytest.raises(ValueError, match=r"jump_success_rate must be a probability in \[0, 1\], got 1.5"):
        jaxenvs.make("HurdleRace-v0", jump_success_rate=1.5)
    with pytest.raises(ValueError, match="track_length must be an integer >= 2"):
        HurdleRace(track_length=1)
    with pytest.raises(ValueError, match=r"hurdle cells must lie in 1 .. track_length - 1 = 9, got \[10\]"):
        HurdleRace(hurdle_slots=((1, 2), (10,)))
    with pytest.raises(ValueError, match="non-empty sequences of integer cells"):
        HurdleRace(hurdle_slots=((1, 2), ()))
    env = jaxenvs.make("HurdleRace-v0", autoreset=False)
    obs, st = env.reset(jax.random.key(0))
    with pytest.raises(jaxenvs.ActionError, match=r"shape \(3,\), expected \(2,\)"):
        env.step(jax.random.key(0), st, jnp.array([0, 1, 0]))
    with pytest.raises(jaxenvs.ActionError, match="expected an integer"):
        env.step(jax.random.key(0), st, jnp.array([0.0, 1.0]))


def test_checked_mode_raises_on_out_of_range_action():
    env = jaxenvs.make("HurdleRace-v0", checked=True)
    obs, st = env.reset(jax.random.key(0))
    step = jaxenvs.checked(env.step)
    step(jax.random.key(1), st, jnp.array([0, 1]))
    with pytest.raises(Exception, match=r"action out of the action space: .*; allowed: Discrete"):
        step(jax.random.key(1), st, jnp.array([0, 2]))


def test_non_default_layout():
    env = HurdleRace(track_length=6, hurdle_slots=((2,), (3, 4, 5)))
    _, st = jax.vmap(env.reset)(jax.random.split(jax.random.key(7), 3000))
    h = np.asarray(st.hurdles)
    assert (h[:, 0] == 2).all() and set(np.unique(h[:, 1])) == {3, 4, 5}
    st = env.step(jax.random.key(0), make_states([5, 3], [2, 4]), jnp.array([RUN, RUN]))[1]
    assert st.pos.tolist() == [6, 3]
    assert env.render(make_states([0, 6], [2, 4])).shape == (2 * (512 // 7), 512, 3)


# ---- rendering -------------------------------------------------------------------------------
def test_render_pixels(env, made):
    cell = 512 // (L + 1)
    st = make_states([4, 10], [2, 4, 8])
    f = np.asarray(jax.jit(env.render)(st))
    assert f.shape == (2 * cell, 512, 3) and f.dtype == np.uint8
    px = lambda x, y: tuple(f[int(y), int(x)].tolist())  # noqa: E731
    assert px(4.5 * cell, 0.5 * cell) == hr.draw.BLUE  # runner 0 on cell 4 (covers that hurdle)
    assert px(10.5 * cell, 1.5 * cell) == hr.draw.RED  # runner 1 past the finish
    for h in (2, 4, 8):
        assert px((h + 0.5) * cell, 1.5 * cell) == hr.draw.BROWN  # hurdles cross track 1 too
    for h in (2, 8):
        assert px((h + 0.5) * cell, 5) == hr.draw.BROWN
    assert px(4.5 * cell, 5) == hr.draw.BROWN  # above runner 0's circle
    for c in (0, 3, 5, 9):
        assert px((c + 0.5) * cell, 5) == hr.draw.WHITE
        assert px((c + 0.5) * cell, 1.5 * cell) == hr.draw.WHITE
    assert px(10 * cell, 0.3 * cell) == hr.draw.GREEN  # finish line
    assert px(3.5 * cell, cell) == hr.draw.BLACK and px(3 * cell, 0.3 * cell) == hr.draw.BLACK  # grid
    assert (f == hr.draw.BLUE).all(-1).sum() > 100 and (f == hr.draw.RED).all(-1).sum() > 100
    assert env.render_text(st) == "0 ..H.0...H.|.\n1 ..H.H...H.|1"
    # through make's wrappers
    obs, wst = made.reset(jax.random.key(0))
    np.testing.assert_array_equal(made.render(wst), env.render(made.unwrapped_state(wst)))


def test_render_batch(env):
    n = 8
    keys = jax.random.split(jax.random.key(8), n)
    _, st = jax.vmap(env.reset)(keys)
    st = st.replace(pos=jnp.asarray(np.random.default_rng(1).integers(0, L + 1, (n, 2)), jnp.int32))
    frames = np.asarray(jax.jit(jax.vmap(env.render))(st))
    assert frames.shape == (n, 2 * (512 // (L + 1)), 512, 3) and frames.dtype == np.uint8
    cell = 512 // (L + 1)
    for i in range(n):
        p = np.asarray(st.pos[i])
        assert tuple(frames[i, cell // 2, int((p[0] + 0.5) * cell)]) == hr.draw.BLUE
        assert tuple(frames[i, cell + cell // 2, int((p[1] + 0.5) * cell)]) == hr.draw.RED
        for h in np.asarray(st.hurdles[i]):
            assert tuple(frames[i, 5, int((h + 0.5) * cell)]) == hr.draw.BROWN
    np.testing.assert_array_equal(frames[3], np.asarray(env.render(jax.tree.map(lambda x: x[3], st))))
