"""jaxenvs.spaces: sampling, membership, flattening and Gymnasium conversion of every space type."""

from __future__ import annotations

import functools

import gymnasium.spaces as gs
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenvs import spaces as S

N_DRAWS = 2000
KEY = jax.random.key(0)
# the programs below run for microseconds: compile them with XLA's cheapest backend passes
FAST_JIT = functools.partial(jax.jit, compiler_options={"xla_backend_optimization_level": 0})


def all_spaces():
    """One instance of every space type (composites nest others), by name."""
    box = S.Box(-1.0, 2.0, (2, 3))
    return {
        "discrete": S.Discrete(5),
        "discrete_start": S.Discrete(3, start=-1),
        "box_float": box,
        "box_float_per_dim": S.Box(np.array([-1.0, 0.0]), np.array([0.0, 10.0])),
        "box_int": S.Box(-3, 3, (4,), np.int32),
        "box_uint8": S.Box(0, 255, (2, 2, 3), np.uint8),
        "box_half_bounded": S.Box(np.array([0.0, -np.inf]), np.array([np.inf, 1.0])),
        "box_unbounded": S.Box(-np.inf, np.inf, (3,)),
        "multi_discrete": S.MultiDiscrete([3, 5, 2]),
        "multi_discrete_2d": S.MultiDiscrete([[2, 3], [4, 5]]),
        "multi_binary": S.MultiBinary(4),
        "multi_binary_2d": S.MultiBinary([2, 3]),
        "dict": S.Dict({"pos": box, "goal": S.Discrete(4), "flags": S.MultiBinary(2)}),
        "tuple": S.Tuple([S.Discrete(2), S.Box(0.0, 1.0, (2,)), S.Dict({"b": S.MultiDiscrete([2, 2])})]),
    }


SPACES = all_spaces()
LEAF_SPACES = {k: s for k, s in SPACES.items() if not isinstance(s, (S.Dict, S.Tuple))}


# ---- sample / contains ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", SPACES)
def test_sample_dtype_shape_membership_jit_and_vmap(name):
    """One jitted program per space: single draws, batched draws, vmapped draws, membership."""
    space = SPACES[name]

    @FAST_JIT
    def draws(key):
        keys = jax.random.split(key, 8)
        one = space.sample(keys[0])
        many = space.sample(key, (N_DRAWS,))
        vmapped = jax.vmap(space.sample)(keys)
        members = (space.contains(one), jax.vmap(space.contains)(many), jax.vmap(space.contains)(vmapped))
        return one, many, vmapped, members

    one, many, vmapped, (in_one, in_many, in_vmapped) = draws(KEY)
    for leaf_space, leaf, leaves, vleaves in zip(
        _leaf_spaces(space), jax.tree.leaves(one), jax.tree.leaves(many), jax.tree.leaves(vmapped)
    ):
        assert leaf.dtype == leaf_space.dtype
        assert leaf.shape == leaf_space.shape
        assert leaves.shape == (N_DRAWS,) + leaf_space.shape
        np.testing.assert_array_equal(vleaves[0], leaf)  # vmapped draw 0 == unbatched draw with key 0
    assert bool(in_one) and np.asarray(in_many).all() and np.asarray(in_vmapped).all()
    # different keys give different draws (8 draws of a space with many elements)
    rows = np.stack([np.concatenate([np.ravel(x[i]) for x in jax.tree.leaves(vmapped)]) for i in range(8)])
    assert len({r.tobytes() for r in rows}) > 1


def _leaf_spaces(space):
    if isinstance(space, S.Dict):
        return [leaf for s in space.spaces.values() for leaf in _leaf_spaces(s)]
    if isinstance(space, S.Tuple):
        return [leaf for s in space.spaces for leaf in _leaf_spaces(s)]
    return [space]


@pytest.mark.parametrize(
    "space, values",
    [
        (S.Discrete(5, start=2), np.arange(2, 7)),  # jax.random.randint
        (S.Discrete(4, start=-1), np.arange(-1, 3)),  # power of two: the low bits of one word
        (S.Discrete(1), np.array([0])),
    ],
    ids=["n=5", "n=4", "n=1"],
)
def test_discrete_is_uniform_chi_square(space, values):
    x = np.asarray(space.sample(KEY, (10_000,)))
    assert x.dtype == np.int32 and x.min() == values[0] and x.max() == values[-1]
    counts = np.bincount(x - values[0], minlength=len(values))
    expected = 10_000 / len(values)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    # chi-square quantiles at p = 0.001 for len(values) - 1 degrees of freedom
    assert chi2 < {1: 0.0, 4: 16.27, 5: 18.47}[len(values)] + 1e-9


def test_multidiscrete_is_uniform_per_dimension():
    # nvec mixes powers of two and not: every entry goes through randint then
    space = S.MultiDiscrete([4, 3])
    x = np.asarray(space.sample(KEY, (10_000,)))
    pow2 = np.asarray(S.MultiDiscrete([8, 2]).sample(KEY, (10_000,)))  # one word per value
    for sample, nvec in ((x, (4, 3)), (pow2, (8, 2))):
        for d, n in enumerate(nvec):
            counts = np.bincount(sample[:, d], minlength=n)
            assert counts.size == n
            expected = 10_000 / n
            chi2 = ((counts - expected) ** 2 / expected).sum()
            assert chi2 < {2: 10.83, 3: 13.82, 4: 16.27, 8: 24.32}[n]  # p = 0.001, n - 1 d.o.f.
    # the dimensions of one sample are independent draws, not one value repeated
    assert np.mean(pow2[:, 0] % 2 == pow2[:, 1]) < 0.6


def test_int_box_reaches_both_bounds_uniformly():
    space = S.Box(-3, 3, (), np.int32)
    x = np.asarray(space.sample(KEY, (7000,)))
    counts = np.bincount(x + 3, minlength=7)
    assert counts.size == 7  # nothing outside [-3, 3]
    chi2 = ((counts - 1000) ** 2 / 1000).sum()
    assert chi2 < 22.46  # 6 degrees of freedom, p = 0.001


def test_float_box_is_uniform_per_dimension():
    space = S.Box(np.array([-1.0, 0.0]), np.array([2.0, 10.0]))
    x = np.asarray(space.sample(KEY, (10_000,)))
    mean, width = np.array([0.5, 5.0]), np.array([3.0, 10.0])
    se = width / np.sqrt(12) / np.sqrt(10_000)
    assert np.all(np.abs(x.mean(0) - mean) < 4 * se)
    assert np.all(x.min(0) >= [-1.0, 0.0]) and np.all(x.max(0) <= [2.0, 10.0])


def test_half_bounded_and_unbounded_box_samples():
    x = np.asarray(SPACES["box_half_bounded"].sample(KEY, (4000,)))
    assert (x[:, 0] >= 0).all() and (x[:, 1] <= 1).all()
    # low-bounded: low + |N(0,1)| has mean sqrt(2/pi); 4 standard errors (sd of |N| = 0.603)
    assert abs(x[:, 0].mean() - np.sqrt(2 / np.pi)) < 4 * 0.603 / np.sqrt(4000)
    z = np.asarray(SPACES["box_unbounded"].sample(KEY, (4000,)))
    assert np.all(np.abs(z.mean(0)) < 4 / np.sqrt(4000)) and np.all(np.abs(z.std(0) - 1) < 0.05)


def test_int_box_with_full_int32_range_samples_more_than_one_value():
    space = S.Box(0, np.iinfo(np.int32).max, (100,), np.int32)
    x = np.asarray(space.sample(KEY))
    assert np.unique(x).size > 90


CONTAINS_CASES = [
    # (space name, element, expected)
    ("discrete", 0, True),
    ("discrete", 4, True),
    ("discrete", 5, False),
    ("discrete", -1, False),
    ("discrete", 1.0, False),  # float dtype
    ("discrete", True, False),  # bool dtype
    ("discrete", np.array([1]), False),  # shape (1,) is not a scalar
    ("discrete_start", -1, True),
    ("discrete_start", 2, False),
    ("box_float", np.zeros((2, 3), np.float32), True),
    ("box_float", np.full((2, 3), 2.0, np.float32), True),
    ("box_float", np.full((2, 3), 2.01, np.float32), False),
    ("box_float", np.zeros((3, 2), np.float32), False),
    ("box_float", np.zeros((2, 3), np.int32), False),
    ("box_float", np.full((2, 3), np.nan, np.float32), False),
    ("box_float_per_dim", np.array([-0.5, 9.0], np.float32), True),
    ("box_float_per_dim", np.array([0.5, 9.0], np.float32), False),
    ("box_int", np.array([-3, 0, 3, 1], np.int32), True),
    ("box_int", np.array([-4, 0, 3, 1], np.int32), False),
    ("box_int", np.array([0.0, 0.0, 0.0, 0.0], np.float32), False),
    ("box_unbounded", np.array([1e30, -1e30, 0.0], np.float32), True),
    ("box_half_bounded", np.array([-0.1, 0.0], np.float32), False),
    ("multi_discrete", np.array([2, 4, 1], np.int32), True),
    ("multi_discrete", np.array([3, 4, 1], np.int32), False),
    ("multi_discrete", np.array([2, 4], np.int32), False),
    ("multi_discrete", np.array([2, -1, 1], np.int32), False),
    ("multi_binary", np.array([0, 1, 1, 0], np.int32), True),
    ("multi_binary", np.array([0, 2, 1, 0], np.int32), False),
    ("multi_binary", np.array([0.0, 1.0, 1.0, 0.0], np.float32), False),
    ("multi_binary_2d", np.ones((2, 3), np.int32), True),
    ("multi_binary_2d", np.ones((3, 2), np.int32), False),
]


@pytest.mark.parametrize("name,x,expected", CONTAINS_CASES)
def test_contains(name, x, expected):
    space = SPACES[name]
    assert bool(space.contains(x)) is expected
    assert bool(jax.jit(space.contains)(x)) is expected
    assert (x in space) is expected


def test_composite_contains():
    d = SPACES["dict"]
    good = d.sample(KEY)
    assert bool(d.contains(good))
    assert not bool(d.contains({k: v for k, v in good.items() if k != "goal"}))
    assert not bool(d.contains({**good, "extra": jnp.int32(0)}))
    assert not bool(d.contains({**good, "goal": jnp.int32(4)}))
    assert not bool(d.contains([good["pos"]]))
    t = SPACES["tuple"]
    good = t.sample(KEY)
    assert bool(t.contains(good)) and bool(t.contains(list(good)))
    assert not bool(t.contains(good[:2]))
    assert not bool(t.contains((jnp.int32(2),) + good[1:]))


def test_dict_keys_are_sorted():
    d = S.Dict({"b": S.Discrete(2), "a": S.Discrete(3), "c": S.Discrete(4)})
    assert list(d.keys()) == ["a", "b", "c"]
    assert list(d.sample(KEY)) == ["a", "b", "c"]


# ---- flatten --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SPACES)
def test_flatten_unflatten_round_trip(name):
    space = SPACES[name]
    flat_space = S.flatten_space(space)

    @FAST_JIT
    def round_trip(key):
        xs = space.sample(key, (16,))
        flat = jax.vmap(lambda x: S.flatten(space, x))(xs)
        return xs, flat, jax.vmap(lambda v: S.unflatten(space, v))(flat), jax.vmap(flat_space.contains)(flat)

    xs, flat, back, in_flat_space = round_trip(KEY)
    assert flat.shape == (16, S.flatdim(space)) and flat.dtype == jnp.float32
    assert jax.tree.structure(back) == jax.tree.structure(xs)
    for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(xs)):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    assert np.asarray(in_flat_space).all()


@pytest.mark.parametrize("name", SPACES)
def test_flatten_matches_gymnasium(name):
    space = SPACES[name]
    gym_space = S.to_gymnasium(space)
    x, flat = FAST_JIT(lambda k: (space.sample(k), S.flatten(space, space.sample(k))))(jax.random.key(3))
    x_np = jax.tree.map(np.asarray, x)
    if isinstance(space, S.Tuple):
        x_np = tuple(x_np)
    expected = gs.flatten(gym_space, x_np)
    np.testing.assert_array_equal(np.asarray(flat), expected.astype(np.float32))
    assert gs.flatdim(gym_space) == S.flatdim(space)
    flat_gym = gs.flatten_space(gym_space)
    flat_ours = S.flatten_space(space)
    np.testing.assert_array_equal(flat_ours.low, flat_gym.low.astype(np.float32))
    np.testing.assert_array_equal(flat_ours.high, flat_gym.high.astype(np.float32))


def test_flatten_one_hot_values():
    np.testing.assert_array_equal(S.flatten(S.Discrete(3, start=-1), 0), [0, 1, 0])
    np.testing.assert_array_equal(S.flatten(S.MultiDiscrete([2, 3]), jnp.array([1, 2])), [0, 1, 0, 0, 1])
    d = S.Dict({"b": S.Discrete(2), "a": S.Box(0.0, 1.0, (1,))})
    np.testing.assert_array_equal(S.flatten(d, {"b": 1, "a": jnp.array([0.25])}), [0.25, 0.0, 1.0])


# ---- Gymnasium conversion -------------------------------------------------------------------------


@pytest.mark.parametrize("name", SPACES)
def test_gymnasium_round_trip(name):
    space = SPACES[name]
    gym_space = S.to_gymnasium(space)
    assert isinstance(gym_space, gs.Space)
    assert S.from_gymnasium(gym_space) == space
    # our samples are members of the Gymnasium space
    x = jax.tree.map(np.asarray, space.sample(KEY))
    assert gym_space.contains(tuple(x) if isinstance(space, S.Tuple) else x)


def test_from_gymnasium_maps_dtypes_to_supported_ones():
    assert S.from_gymnasium(gs.Box(0, 5, (2,), np.int64)) == S.Box(0, 5, (2,), np.int32)
    assert S.from_gymnasium(gs.Box(-1.0, 1.0, (3,), np.float64)) == S.Box(-1.0, 1.0, (3,))
    assert S.from_gymnasium(gs.Box(0, 255, (4, 4, 3), np.uint8)) == S.Box(0, 255, (4, 4, 3), np.uint8)
    assert S.from_gymnasium(gs.Discrete(5, start=2)) == S.Discrete(5, start=2)
    gym_discrete = S.to_gymnasium(S.Discrete(3, start=-1))
    assert (gym_discrete.n, gym_discrete.start) == (3, -1)
    with pytest.raises(TypeError, match="no jaxenvs equivalent"):
        S.from_gymnasium(gs.Text(5))


# ---- construction errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build,error,match",
    [
        (lambda: S.Discrete(0), ValueError, "n >= 1"),
        (lambda: S.Discrete(2.5), ValueError, "integer n"),
        (lambda: S.Discrete(True), ValueError, "integer n"),
        (lambda: S.Box(1.0, 0.0, (2,)), ValueError, "low <= high"),
        (lambda: S.Box(np.array([0.0, 1.0]), np.array([1.0, 0.5])), ValueError, "low <= high"),
        (lambda: S.Box(0.0, 1.0, (2,), np.float64), TypeError, "float64.*allowed: float32, int32, uint8"),
        (lambda: S.Box(0, 1, (2,), bool), TypeError, "bool"),
        (lambda: S.Box(np.zeros(3), np.ones(3), (2,)), ValueError, "do not broadcast"),
        (lambda: S.Box(np.nan, 1.0, (2,)), ValueError, "NaN"),
        (lambda: S.Box(0, np.inf, (2,), np.int32), ValueError, "finite bounds"),
        (lambda: S.Box(-1, 10, (2,), np.uint8), ValueError, "range of uint8"),
        (lambda: S.MultiDiscrete([3, 0]), ValueError, "integers >= 1"),
        (lambda: S.MultiDiscrete([]), ValueError, "non-empty"),
        (lambda: S.MultiDiscrete([2.5, 3]), ValueError, "integers"),
        (lambda: S.MultiBinary(0), ValueError, "positive sizes"),
        (lambda: S.Dict({}), ValueError, "non-empty mapping"),
        (lambda: S.Dict({"a": gs.Discrete(2)}), TypeError, "'a' is Discrete, not a jaxenvs Space"),
        (lambda: S.Dict({"a": S.Discrete(2), 1: S.Discrete(3)}), TypeError, r"keys must be strings .* got 1 \(int\) among \['a', 1\]"),
        (lambda: S.Tuple([]), ValueError, "at least one"),
        (lambda: S.Tuple([S.Discrete(2), 3]), TypeError, "entry 1 is int"),
    ],
)
def test_construction_errors(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_equality_and_repr():
    assert S.Box(0.0, 1.0, (2,)) == S.Box(np.zeros(2), np.ones(2))
    assert S.Box(0.0, 1.0, (2,)) != S.Box(0.0, 2.0, (2,))
    assert S.Box(0, 1, (2,), np.int32) != S.Box(0.0, 1.0, (2,))
    assert S.Discrete(3) != S.Discrete(3, start=1)
    assert repr(S.Discrete(3, start=1)) == "Discrete(3, start=1)"
    assert repr(S.Box(0.0, 1.0, (2,))) == "Box(0.0, 1.0, (2,), float32)"
    # bounds given as float64 text of a float32 value print as the float32 they are
    assert repr(S.Box(-0.10000000149011612, np.float32(0.1), (2,))) == "Box(-0.1, 0.1, (2,), float32)"
