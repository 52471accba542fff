"""Bad input to spaces, and properties every space keeps (hypothesis): a sample
lies in its space, and flatten/unflatten round-trips every element."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import assert_trees_equal
from jaxenvs import spaces as S

KEY = jax.random.key(0)

CASES = [
    # (what, build, error, message) — the examples first
    ("Box shape as int", lambda: S.Box(0, 1, shape=2).shape, None, (2,)),
    ("Box low/high shapes differ", lambda: S.Box(np.zeros(2), np.ones(3)), ValueError,
     r"Box low of shape \(2,\) and high of shape \(3,\) do not broadcast"),
    ("Box low/high do not fit shape", lambda: S.Box(np.zeros(2), 1.0, (3,)), ValueError,
     r"Box low \(2,\) and high \(\) do not broadcast to shape \(3,\)"),
    ("Box shape of floats", lambda: S.Box(0, 1, shape=(2.5,)), ValueError,
     r"Box shape must be an int or a tuple of ints >= 0, got \(2\.5,\)"),
    ("Box negative shape", lambda: S.Box(0, 1, shape=-1), ValueError, r"Box shape must be an int or a tuple of ints >= 0"),
    ("Discrete(2**31)", lambda: S.Discrete(2**31), ValueError,
     r"Discrete\(n=2147483648, start=0\): its values are int32, so .* start \+ n <= 2147483647"),
    ("Discrete start near int32 max", lambda: S.Discrete(2, start=2**31 - 2), ValueError, r"its values are int32"),
    ("MultiBinary(2.7)", lambda: S.MultiBinary(2.7), ValueError,
     r"MultiBinary needs positive sizes \(an int >= 1 or a tuple of them\), got 2\.7"),
    ("MultiBinary((2, 0.5))", lambda: S.MultiBinary((2, 0.5)), ValueError, r"MultiBinary needs positive sizes"),
    ("int Box, non-integral bounds", lambda: S.Box(0.5, 2.5, (2,), np.int32), ValueError,
     r"a int32 Box needs integral bounds, got low=\[0\.5 0\.5\], high=\[2\.5 2\.5\] \(round them, or use a float32 Box\)"),
    ("MultiDiscrete beyond int32", lambda: S.MultiDiscrete([2, 2**32]), ValueError, r"every nvec entry must be <= 2147483647"),
    ("sample(key, 5)", lambda: S.Discrete(3).sample(KEY, 5), TypeError,
     r"Discrete\(3\)\.sample\(key, batch_shape\): batch_shape must be a tuple of ints >= 0, e\.g\. \(5,\), got 5"),
    ("sample(key, (2.0,))", lambda: S.Box(0, 1, (2,)).sample(KEY, (2.0,)), TypeError, r"batch_shape must be a tuple of ints"),
    ("flatten Dict missing a key", lambda: S.flatten(S.Dict({"a": S.Discrete(2), "b": S.Discrete(3)}), {"a": 1}), ValueError,
     r"flatten: the element must be a dict with keys \['a', 'b'\], got \['a'\]"),
    ("flatten Tuple too short", lambda: S.flatten(S.Tuple([S.Discrete(2), S.Discrete(3)]), (1,)), ValueError,
     r"flatten: the element must be a tuple of 2 entries, got 1 entries"),
    # contains of a value that is no numeric array: False (Gymnasium's answer), not a JAX dtype error
    ("Discrete.contains('a')", lambda: bool(S.Discrete(3).contains("a")), None, False),
    ("Discrete.contains(None)", lambda: bool(S.Discrete(3).contains(None)), None, False),
    ("Box.contains('a')", lambda: bool(S.Box(0, 1, ()).contains("a")), None, False),
    ("MultiDiscrete.contains(object)", lambda: bool(S.MultiDiscrete([2, 2]).contains([object(), 1])), None, False),
    ("Discrete.contains(2)", lambda: bool(S.Discrete(3).contains(2)), None, True),
    # a mask given as a host list is read as NumPy reads it; what cannot be a mask is named
    ("sample mask list of ints", lambda: int(S.Discrete(3).sample(KEY, mask=[0, 0, 1])), None, 2),
    ("sample mask list of bools", lambda: int(S.Discrete(3).sample(KEY, mask=[False, True, False])), None, 1),
    ("sample mask list of floats", lambda: S.Discrete(3).sample(KEY, mask=[0.0, 1.0, 1.0]), TypeError,
     r"Discrete\(3\)\.sample: mask must be bool or integer \(nonzero = legal\), got float64"),
    ("sample mask ragged list", lambda: S.Discrete(3).sample(KEY, mask=[[1, 0, 1], [1]]), TypeError,
     r"Discrete\(3\)\.sample: mask must be an array of shape \(\.\.\., 3\), got a ragged list"),
    ("sample mask 'abc'", lambda: S.Discrete(3).sample(KEY, mask="abc"), TypeError,
     r"Discrete\(3\)\.sample: mask must be a bool or integer array of shape \(\.\.\., 3\) \(nonzero = legal\), got 'abc'"),
]


@pytest.mark.parametrize("build, error, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_space_misuse_gets_a_clear_error_or_the_documented_result(build, error, expected):
    if error is None:
        assert build() == expected
    else:
        with pytest.raises(error, match=expected):
            build()


# ---- properties ------------------------------------------------------------------------------

SMALL = st.integers(1, 4)
bounds = st.tuples(st.integers(-5, 5), st.integers(0, 6)).map(lambda t: (t[0], t[0] + t[1]))
leaf_spaces = st.one_of(
    st.builds(lambda n, s: S.Discrete(n, start=s), SMALL, st.integers(-3, 3)),
    st.builds(lambda shape, b: S.Box(b[0], b[1], shape, np.float32), st.tuples(SMALL), bounds),
    st.builds(lambda shape, b: S.Box(b[0], b[1], shape, np.int32), st.tuples(SMALL, SMALL), bounds),
    st.builds(S.MultiDiscrete, st.lists(SMALL, min_size=1, max_size=3)),
    st.builds(S.MultiBinary, SMALL),
)
any_space = st.recursive(
    leaf_spaces,
    lambda inner: st.one_of(
        st.builds(S.Tuple, st.lists(inner, min_size=1, max_size=2)),
        st.builds(S.Dict, st.dictionaries(st.sampled_from("abc"), inner, min_size=1, max_size=2)),
    ),
    max_leaves=3,
)


@settings(max_examples=6, deadline=None, derandomize=True)
@given(space=any_space, seed=st.integers(0, 2**31 - 1))
def test_sample_lies_in_the_space_and_flatten_round_trips(space, seed):
    def run(key):  # one compiled program per example (eager ops would compile one by one)
        x = space.sample(key)
        v = S.flatten(space, x)
        return x, space.contains(x), v, S.flatten_space(space).contains(v), S.unflatten(space, v)

    fast = {"xla_backend_optimization_level": 0}
    x, inside, v, flat_inside, back = jax.jit(run, compiler_options=fast)(jax.random.key(seed))
    assert bool(inside) and bool(flat_inside)
    assert v.shape == (S.flatdim(space),) and v.dtype == jnp.float32
    assert_trees_equal(back, x, dtypes=True)
