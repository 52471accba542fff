"""Golden trajectories (tests/golden.py): every registered environment reproduces the digest of its
trajectory recorded in tests/golden_trajectories.json for this JAX version, bit for bit; a change
is reported with the env, the first differing step and the leaf, and a planted one-ULP change of
one env's reward is caught."""

from __future__ import annotations

import zlib

import jax.numpy as jnp
import numpy as np
import pytest

import golden
from jaxenvs.envs.point_env import PointEnv

GOLDEN = golden.load()


def _every_id_leaving_the_registry_as_it_was() -> list[str]:
    """`golden.env_ids` loads the lazy namespaces (gymnax/) into the registry; at collection time that
    would hand every later-collected module's ``sorted(jaxenvs.registry)`` the gymnax ids too, so
    the registry is put back as it was (``make("gymnax/...")`` loads the namespace again when run)."""
    from jaxenvs import registration

    registry, loaded = dict(registration.registry), set(registration._lazy_loaded)
    try:
        return golden.env_ids()
    finally:
        registration.registry.clear()
        registration.registry.update(registry)
        registration._lazy_loaded.clear()
        registration._lazy_loaded.update(loaded)


IDS = _every_id_leaving_the_registry_as_it_was()


def _flip_one_bit(x: np.ndarray, t: int) -> np.ndarray:
    """A copy of ``x`` with the lowest bit of step ``t``'s first byte flipped."""
    y = np.array(x)
    y.reshape(len(y), -1)[t].view(np.uint8)[0] ^= 1
    return y


@pytest.mark.parametrize("env_id", IDS)
def test_trajectory_matches_its_golden_digest(env_id):
    env, why = golden.build(env_id)
    if env is None:
        pytest.skip(f"{env_id} cannot be built here: {why}")
    leaves = golden.trajectory(env)
    actual = golden.digest(leaves)
    ok, message = golden.compare(env_id, actual, GOLDEN)
    print(message)  # which JAX version's record it was compared against
    assert ok, message
    assert golden.platform() in message  # the record listing this version, or "(version) has no record of its own"
    # the comparison names any one-bit change of any leaf at its step (one random step per leaf)
    rng = np.random.default_rng(zlib.crc32(env_id.encode()))
    for name, x in leaves.items():
        if x[0].size == 0:
            continue
        t = int(rng.integers(golden.STEPS))
        planted = {**actual, **golden.digest({name: _flip_one_bit(x, t)})}
        ok, message = golden.compare(env_id, planted, GOLDEN)
        assert not ok and f"{env_id}: trajectory differs" in message, message
        assert f"first differing step {t}, leaf {name}:" in message, message
        assert f"`python tests/golden.py {env_id}`" in message


def test_a_planted_one_ulp_reward_change_is_named(monkeypatch):
    """PointEnv's reward one ULP up whenever the action's x component exceeds 0.09: the env, the
    first such step and the leaf ``reward`` are named, no other leaf."""
    faithful = PointEnv.step_env

    def step_env(self, key, state, action, params):
        obs, state, reward, terminated, truncated, info = faithful(self, key, state, action, params)
        reward = jnp.where(action[0] > 0.09, jnp.nextafter(reward, jnp.float32(jnp.inf)), reward)
        return obs, state, reward, terminated, truncated, info

    monkeypatch.setattr(PointEnv, "step_env", step_env)
    env, _ = golden.build("PointEnv-v0")
    leaves = golden.trajectory(env)
    hits = np.flatnonzero(leaves["action"][:, 0] > 0.09)
    assert 0 < len(hits) < golden.STEPS // 4  # the change is planted on a few steps, not from the start
    ok, message = golden.compare("PointEnv-v0", golden.digest(leaves), GOLDEN)
    assert not ok
    assert "PointEnv-v0: trajectory differs from the golden digest recorded for " in message, message
    assert f"first differing step {hits[0]}, leaf reward: values differ at step {hits[0]} in reward." in message, message
    assert "later in" not in message  # observations, info and flags are untouched


def _leaf(values: list[int]) -> dict:
    return golden.digest({"reward": np.array(values, np.float32)})


def test_records_are_per_jax_version_and_strict_for_a_listed_version():
    a, b = _leaf([0, 1, 2, 3]), _leaf([0, 1, 2, 4])
    book = {"envs": {}}
    assert golden.record(book, "X-v0", a, where="jax 0.10.2 cpu") == "new"
    assert golden.record(book, "X-v0", a, where="jax 0.4.36 cpu") == (
        "bit-identical to the record of jax 0.10.2 cpu: jax 0.4.36 cpu added to it")
    assert golden.record(book, "X-v0", a, where="jax 0.4.36 cpu") == "unchanged"
    assert book["envs"]["X-v0"] == [{"platforms": ["jax 0.4.36 cpu", "jax 0.10.2 cpu"], "leaves": a}]
    # a JAX version that rounds otherwise gets a record of its own, written explicitly
    assert golden.record(book, "X-v0", b, where="jax 0.12.0 cpu") == (
        "a record of its own for jax 0.12.0 cpu (values differ at step 3 in reward)")
    assert [r["platforms"] for r in book["envs"]["X-v0"]] == [["jax 0.4.36 cpu", "jax 0.10.2 cpu"], ["jax 0.12.0 cpu"]]
    # a listed version is held to its own record (the other one does not excuse it) ...
    ok, message = golden.compare("X-v0", b, book, where="jax 0.10.2 cpu")
    assert not ok and "recorded for jax 0.4.36 cpu, jax 0.10.2 cpu (compared on jax 0.10.2 cpu)" in message
    assert "first differing step 3, leaf reward" in message
    assert golden.compare("X-v0", b, book, where="jax 0.12.0 cpu") == (True, "X-v0: equal to the digest recorded for jax 0.12.0 cpu")
    # ... an unlisted one must equal some record bit for bit, and says which
    ok, message = golden.compare("X-v0", a, book, where="jax 0.13.0 cpu")
    assert ok and message == ("X-v0: equal to the digest recorded for jax 0.4.36 cpu, jax 0.10.2 cpu "
                              "(jax 0.13.0 cpu has no record of its own: bit-identical)")
    ok, message = golden.compare("X-v0", _leaf([9, 1, 2, 3]), book, where="jax 0.13.0 cpu")
    assert not ok and "which has no record of its own): first differing step 0, leaf reward" in message
    # a deliberate change of dynamics replaces every record
    assert golden.record(book, "X-v0", b, replace=True, where="jax 0.10.2 cpu") == (
        "bit-identical to the record of jax 0.12.0 cpu: jax 0.10.2 cpu added to it; "
        "dropped the stale records of jax 0.4.36 cpu")
    assert book["envs"]["X-v0"] == [{"platforms": ["jax 0.10.2 cpu", "jax 0.12.0 cpu"], "leaves": b}]
    ok, message = golden.compare("Y-v0", a, book)
    assert not ok and message == ("Y-v0: no golden digest recorded; record it with `python tests/golden.py Y-v0` "
                                  "and commit the JSON")


def test_a_changed_dtype_or_a_new_leaf_is_named():
    a = _leaf([0, 1, 2, 3])
    wider = golden.digest({"reward": np.array([0, 1, 2, 3], np.int32)})
    assert golden.first_difference(a, wider) == (None, ["reward"], "reward: float32[] -> int32[]")
    more = {**a, **golden.digest({"info/x": np.zeros(4, bool)})}
    assert golden.first_difference(a, more) == (None, ["info/x"], "info/x: leaf added")
    assert golden.first_difference(a, dict(a)) is None


def test_the_file_holds_this_version_and_only_registered_ids():
    """Every id recorded is registered here (or belongs to a namespace whose package is not
    installed here, e.g. gymnax/ on the floors' venv), and the file is what `dumps` writes."""
    namespaces = {i.split("/")[0] for i in IDS if "/" in i}
    stale = [i for i in GOLDEN["envs"] if i not in IDS and ("/" not in i or i.split("/")[0] in namespaces)]
    assert not stale, f"golden digests of ids no longer registered: {stale}; remove them from {golden.PATH.name}"
    assert golden.PATH.read_text() == golden.dumps(GOLDEN)
    assert (GOLDEN["steps"], GOLDEN["seed"]) == (golden.STEPS, golden.SEED)


def test_the_regenerating_command_refuses_mistakes(capsys):
    with pytest.raises(SystemExit) as exit_:
        golden.main(["Nope-v0"])
    assert exit_.value.code == 2 and "unknown env id(s) Nope-v0; registered here: ConnectFour-v0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        golden.main(["--replace"])
    assert "--replace drops other JAX versions' records: name the ids whose dynamics changed" in capsys.readouterr().err
