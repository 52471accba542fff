"""PRNG keys: an int, a float array or a batch of keys where one
key belongs is refused, naming ``jax.random.key(seed)``, in reset, step, sample and check_env."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs import spaces
from jaxenvs.core import PRNGKeyError

KEY = jax.random.key(0)
ENV = jaxenvs.make("GridWorld-v0")
STATE = jax.eval_shape(ENV.reset, KEY)[1]
EXPECTED = r"expected a jax\.random\.key\(seed\) \(or jax\.random\.PRNGKey\(seed\)\), got "

BAD_KEYS = [
    ("int", 0, EXPECTED + "(0 \\(int\\)|an array of dtype int32 and shape \\(\\))"),
    ("float array", jnp.zeros(2, jnp.float32), EXPECTED + "an array of dtype float32 and shape \\(2,\\)"),
    ("int32 array", np.array([0, 1], np.int32), EXPECTED + "an array of dtype int32 and shape \\(2,\\)"),
    ("batch of typed keys", jax.random.split(KEY, 3), "shape \\(3,\\); a batch of keys needs jax\\.vmap"),
    ("batch of raw keys", jax.random.split(jax.random.PRNGKey(0), 3), "shape \\(3, 2\\); a batch of keys needs jax\\.vmap"),
]
CALLS = [
    ("reset", lambda key: jax.eval_shape(ENV.reset, key), r"GridWorld\.reset: "),
    ("step", lambda key: jax.eval_shape(ENV.step, key, STATE, 1), r"GridWorld\.step: "),
    ("Discrete.sample", lambda key: spaces.Discrete(4).sample(key), r"Discrete\(4\)\.sample: "),
    ("Dict.sample", lambda key: ENV.observation_space().sample(key), r"Dict\(.*\)\.sample: "),
    ("check_env", lambda key: jaxenvs.check_env(ENV, key=key), r"check_env: "),
]


@pytest.mark.parametrize("key, key_match", [b[1:] for b in BAD_KEYS], ids=[b[0] for b in BAD_KEYS])
@pytest.mark.parametrize("call, where", [c[1:] for c in CALLS], ids=[c[0] for c in CALLS])
def test_a_non_key_is_refused_with_a_clear_error(call, where, key, key_match):
    with pytest.raises(PRNGKeyError, match=where + ".*" + key_match):
        call(key)


def test_typed_and_raw_keys_are_accepted():
    assert issubclass(PRNGKeyError, TypeError)
    for key in (KEY, jax.random.PRNGKey(0)):
        obs, state = jax.eval_shape(ENV.reset, key)
        assert obs["agent"].shape == (2,)
        assert spaces.Discrete(4).sample(key).dtype == jnp.int32
