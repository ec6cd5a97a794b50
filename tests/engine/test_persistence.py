"""Model persistence: exact round trips, clear errors for every malformed input, no pickle."""

from __future__ import annotations

import enum
import hashlib
import io
import json
import math
import pickle
import random
import struct
import zipfile
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from engine.base import BaseEstimator
from engine.persistence import (
    FORMAT_VERSION,
    ModelFormatError,
    load_model,
    model_manifest,
    register_model_class,
    save_model,
)

NODE_DTYPE = np.dtype(
    [
        ("feature", "<i4"),
        ("threshold", "<f8"),
        ("missing_left", "?"),
        ("left", "<i4"),
        ("right", "<i4"),
        ("value", "<f8"),
        ("gain", "<f4"),
    ],
    align=True,
)


@register_model_class
class FakeBinMapper:
    """A plain helper object an estimator keeps, as a real bin mapper would be."""

    def __init__(self, thresholds: list[np.ndarray]) -> None:
        self.bin_thresholds_ = thresholds
        self.n_bins = np.int64(255)


@register_model_class
class FakeTree(BaseEstimator):
    def __init__(self, max_depth: int | None = None) -> None:
        self.max_depth = max_depth

    def grow(self, rng: np.random.Generator, n_features: int) -> FakeTree:
        nodes = np.zeros(3, dtype=NODE_DTYPE)
        nodes["feature"] = [rng.integers(n_features), -1, -1]
        nodes["threshold"] = [rng.normal(), np.nan, np.nan]
        nodes["left"], nodes["right"] = [1, -1, -1], [2, -1, -1]
        nodes["value"] = rng.normal(size=3)
        nodes["gain"] = [rng.random(), 0, 0]
        self.tree_ = nodes
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        root = self.tree_[0]
        go_left = X[:, root["feature"]] <= root["threshold"]
        return np.where(go_left, self.tree_["value"][1], self.tree_["value"][2])


@register_model_class
class FakeForest(BaseEstimator):
    """Holds every kind of value the format supports."""

    _persistence_exclude: ClassVar[tuple[str, ...]] = ("_predict_cache",)

    def __init__(
        self,
        n_estimators: int = 3,
        class_weight: Any = None,
        max_features: float | str = "sqrt",
        random_state: Any = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.class_weight = class_weight
        self.max_features = max_features
        self.random_state = random_state

    def fit(self, X: np.ndarray) -> FakeForest:
        root = np.random.SeedSequence(self.random_state)
        seeds = root.spawn(self.n_estimators)
        self.estimators_ = [
            FakeTree(max_depth=3).grow(np.random.default_rng(s), X.shape[1]) for s in seeds
        ]
        self._seed_sequence = seeds[-1]
        self._bin_mapper = FakeBinMapper([np.quantile(col, [0.25, 0.5, 0.75]) for col in X.T])
        self.n_features_in_ = X.shape[1]
        self.classes_ = np.array(["cat", "dög", "🐍"])
        self.labels_ = np.array(["a", 1, 2.5, True], dtype=object)
        self.scores_ = {"oob": float("nan"), "train": -math.inf, "best": math.inf, "zero": -0.0}
        self.big_int_ = 2**70
        self.shape_ = (3, (4, None), [])
        self.weights_by_key_ = {(0, "a"): 1.0, np.int64(7): np.float32(0.5), None: True}
        self.scalars_ = [np.int64(-3), np.float32(1.5), np.bool_(True), np.str_("ß"), np.uint8(9)]
        self.more_arrays_ = {
            "binned": np.arange(24, dtype=np.uint8).reshape(2, 3, 4),
            "half": np.array([1.5, -0.0, np.inf], dtype=np.float16),
            "complex": np.array([1 + 2j, np.nan * 1j]),
            "bytes": np.array([b"ab", b""]),
            "mask": np.array([[True, False]]),
            "zero_d": np.array(2.5),
            "empty": np.zeros((0, 7), dtype=np.int32),
            "packed": np.zeros(2, dtype=[("a", "<i2"), ("b", "<U3"), ("c", "<f8", (2, 2))]),
        }
        self.dtype_ = np.dtype("<f4")
        self.oob_score_ = None
        self._predict_cache = lambda: None  # excluded: a cache the class rebuilds
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.mean([tree.predict(X) for tree in self.estimators_], axis=0)


def _fitted(n_estimators: int = 3) -> FakeForest:
    X = np.random.default_rng(0).normal(size=(40, 4))
    forest = FakeForest(n_estimators, class_weight={0: 1.0, 1: 2.5}, random_state=7)
    return forest.fit(X)


def assert_same(a: Any, b: Any, path: str = "model") -> None:
    """Equal values of equal types; arrays bit for bit, with equal dtypes and shapes."""
    assert type(a) is type(b), path
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert a.dtype.isalignedstruct == b.dtype.isalignedstruct, path
        if a.dtype.hasobject:
            assert_same(a.tolist(), b.tolist(), path)
        else:
            assert a.tobytes() == b.tobytes(), path
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), path
    elif isinstance(a, float):
        assert struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert_same(list(a), list(b), f"{path}.keys()")
        for key in a:
            assert_same(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, np.random.SeedSequence):
        assert a.state == b.state, path
    elif hasattr(a, "__dict__"):
        assert_same(vars(a), vars(b), path)
    else:
        assert a == b, path


# --- round trips -------------------------------------------------------------------------------


def test_round_trip_keeps_every_value_exactly() -> None:
    forest = _fitted()
    loaded = load_model(save_model(forest))
    del forest._predict_cache
    assert_same(forest, loaded)
    assert not hasattr(loaded, "_predict_cache")
    assert loaded.get_params() == forest.get_params()
    assert all(array.flags.writeable for array in loaded.more_arrays_.values())


def test_round_trip_predicts_bit_identically_and_saves_the_same_bytes() -> None:
    forest = _fitted()
    data = save_model(forest)
    loaded = load_model(data)
    X = np.random.default_rng(1).normal(size=(100, 4))
    assert forest.predict(X).tobytes() == loaded.predict(X).tobytes()
    assert save_model(loaded) == data


def test_arrays_come_back_little_endian_and_c_contiguous() -> None:
    forest = _fitted()
    big = np.arange(6, dtype=">f8").reshape(2, 3)
    forest.more_arrays_ = {"big": big, "fortran": np.asfortranarray(big), "nodes": big.T[::2]}
    forest.estimators_[0].tree_ = forest.estimators_[0].tree_.astype(NODE_DTYPE.newbyteorder(">"))
    loaded = load_model(save_model(forest))
    for name, original in forest.more_arrays_.items():
        array = loaded.more_arrays_[name]
        assert array.dtype == np.dtype("<f8") and array.flags.c_contiguous
        np.testing.assert_array_equal(array, original)
    tree = loaded.estimators_[0].tree_
    assert tree.dtype == NODE_DTYPE
    for field in NODE_DTYPE.names or ():
        np.testing.assert_array_equal(tree[field], forest.estimators_[0].tree_[field])


def test_seed_sequence_keeps_its_stream() -> None:
    forest = _fitted()
    forest._seed_sequence.spawn(2)
    loaded = load_model(save_model(forest))
    assert loaded._seed_sequence.n_children_spawned == 2
    expected = [s.generate_state(4) for s in forest._seed_sequence.spawn(2)]
    actual = [s.generate_state(4) for s in loaded._seed_sequence.spawn(2)]
    np.testing.assert_array_equal(actual, expected)


@register_model_class
class Box:
    def __init__(self, value: Any) -> None:
        self.value = value


def _plain_values() -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
    arrays = hnp.arrays(
        hnp.boolean_dtypes()
        | hnp.integer_dtypes(endianness="<")
        | hnp.floating_dtypes(endianness="<")
        | hnp.unicode_string_dtypes(endianness="<"),
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3),
    )
    return st.recursive(
        scalars | arrays,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.lists(inner, max_size=3).map(tuple)
            | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=3)
        ),
        max_leaves=10,
    )


@settings(max_examples=100, deadline=None)
@given(_plain_values())
def test_any_supported_value_round_trips(value: Any) -> None:
    assert_same(Box(value), load_model(save_model(Box(value))))


def test_manifest_describes_the_model_without_building_it() -> None:
    data = save_model(_fitted())
    manifest = model_manifest(data)
    assert manifest["class"].endswith("test_persistence.FakeForest")
    assert manifest["format_version"] == "{}.{}".format(*FORMAT_VERSION)
    assert manifest["saved_with"]["numpy"] == np.__version__
    assert manifest["total_nbytes"] == len(data)
    assert 0 < manifest["array_nbytes"] < len(data) and manifest["n_arrays"] > 10


# --- what cannot be saved -------------------------------------------------------------------------


class Color(enum.IntEnum):
    RED = 1


class Unregistered:
    pass


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda f: setattr(f.estimators_[1], "tree_", object()), r"estimators_\[1\]\.tree_"),
        (lambda f: f.scores_.update(fn=len), r"scores_\['fn'\]"),
        (lambda f: setattr(f, "color_", Color.RED), "color_"),
        (lambda f: setattr(f, "when_", np.array(["2024-01-01"], "M8[D]")), "when_"),
        (lambda f: setattr(f, "labels_", np.array([None, [1]], dtype=object)), r"labels_"),
        (lambda f: setattr(f, "labels_", np.array([(1,)], dtype=[("a", "O")])), "labels_"),
        (lambda f: setattr(f, "helper_", Unregistered()), "helper_"),
        (lambda f: setattr(f, "keys_", {frozenset(): 1}), "keys_"),
        (lambda f: setattr(f, "rng_", np.random.default_rng(0)), "rng_"),
        (lambda f: setattr(f, "self_", f), "nested too deeply"),
    ],
)
def test_unsupported_values_are_refused_by_attribute_path(
    change: Callable[[FakeForest], None], path: str
) -> None:
    forest = _fitted()
    change(forest)
    with pytest.raises(TypeError, match=path):
        save_model(forest)


def test_only_registered_classes_can_be_saved_or_registered() -> None:
    with pytest.raises(TypeError, match="not a registered model class"):
        save_model(Unregistered())

    class Local:
        pass

    with pytest.raises(ValueError, match="local"):
        register_model_class(Local)


# --- what cannot be loaded ------------------------------------------------------------------------


def _split(data: bytes) -> tuple[int, int, dict[str, Any], bytes]:
    """Take a model apart along the documented layout."""
    _magic, major, minor, size = struct.unpack_from("<8sHHI", data)
    manifest = json.loads(data[16 : 16 + size])
    start = -(-(16 + size) // 8) * 8
    return major, minor, manifest, data[start:-32]


def _build(manifest: Any, region: bytes, major: int = 1, minor: int = 0) -> bytes:
    """Assemble a model with a valid digest, so the check under test is the one that fires."""
    text = json.dumps(manifest).encode() if not isinstance(manifest, bytes) else manifest
    body = struct.pack("<8sHHI", b"COPPICE\0", major, minor, len(text)) + text
    body += bytes(-len(body) % 8) + region
    return body + hashlib.sha256(body).digest()


@pytest.fixture(scope="module")
def small_model() -> bytes:
    return save_model(_fitted(n_estimators=1))


def test_the_test_layout_helpers_match_the_writer(small_model: bytes) -> None:
    major, minor, manifest, region = _split(small_model)
    assert _build(manifest, region, major, minor) != small_model  # separators differ
    assert_same(load_model(_build(manifest, region, major, minor)), load_model(small_model))


def test_truncation_at_every_length_is_a_format_error(small_model: bytes) -> None:
    for cut in range(len(small_model)):
        with pytest.raises(ModelFormatError):
            load_model(small_model[:cut])


def test_corrupted_bytes_are_a_format_error(small_model: bytes) -> None:
    rng = random.Random(20240601)
    variants = []
    for position in range(len(small_model)):
        flipped = bytearray(small_model)
        flipped[position] ^= rng.randrange(1, 256)
        variants.append(bytes(flipped))
    for _ in range(1000):
        damaged = bytearray(small_model)
        for _ in range(rng.randrange(1, 8)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        variants.append(bytes(damaged))
    for variant in variants:
        if variant != small_model:
            with pytest.raises(ModelFormatError):
                load_model(variant)


def _zip_file() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("manifest.json", "{}")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "too short"),
        (random.Random(1).randbytes(5000), "magic"),
        (pickle.dumps({"a": np.zeros(3)}), "magic|too short"),
        (_zip_file(), "magic"),
        (b"COPPICE\0" + bytes(100), "version 0.0"),
        (bytearray(_build({}, b"")), "not a Coppice model manifest"),
        (memoryview(_build(b"\xff\xfe", b"")), "utf-8"),
        (_build(b'{"format": NaN}', b""), "NaN"),
        (_build(b"[" * 100_000 + b"]" * 100_000, b""), "Malformed"),
        (_build({}, b"", major=2, minor=3), "newer Coppice \\(format 2.3\\)"),
    ],
)
def test_foreign_bytes_are_a_format_error(data: bytes, message: str) -> None:
    with pytest.raises(ModelFormatError, match=message):
        load_model(data)
    with pytest.raises(ModelFormatError):
        model_manifest(data)


def test_loading_wants_bytes() -> None:
    with pytest.raises(TypeError, match="bytes"):
        load_model("COPPICE")  # type: ignore[arg-type]


def _first_array(manifest: dict[str, Any], **changes: Any) -> None:
    manifest["arrays"][0].update(changes)


def _tree_node(manifest: dict[str, Any]) -> dict[str, Any]:
    return manifest["state"]["attrs"]["estimators_"][0]


FORGERIES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "huge shape": lambda m: _first_array(m, shape=[2**40, 2**40]),
    "huge empty shape": lambda m: _first_array(m, shape=[0, 2**62], nbytes=0),
    "many dims": lambda m: _first_array(m, shape=[1] * 100),
    "negative dim": lambda m: _first_array(m, shape=[-1]),
    "offset past the end": lambda m: _first_array(m, offset=10**9),
    "length past the end": lambda m: _first_array(m, shape=[10**6], nbytes=10**6 * 48),
    "length mismatch": lambda m: _first_array(m, nbytes=m["arrays"][0]["nbytes"] + 8),
    "bool offset": lambda m: _first_array(m, offset=True),
    "object dtype": lambda m: _first_array(m, dtype="|O"),
    "datetime dtype": lambda m: _first_array(m, dtype="<M8[ns]"),
    "big-endian dtype": lambda m: _first_array(m, dtype=">f8"),
    "dtype as list": lambda m: _first_array(m, dtype=[["a", "<f8"]]),
    "field outside item": lambda m: m["arrays"][0]["dtype"]["offsets"].__setitem__(0, 10**6),
    "huge itemsize": lambda m: m["arrays"][0]["dtype"].update(itemsize=2**40),
    "object field": lambda m: m["arrays"][0]["dtype"]["formats"].__setitem__(0, "|O"),
    "duplicate field": lambda m: m["arrays"][0]["dtype"]["names"].__setitem__(1, "feature"),
    "extra array key": lambda m: _first_array(m, extra=1),
    "array ref out of range": lambda m: _tree_node(m)["attrs"]["tree_"].update(ref=10**6),
    "scalar of an array": lambda m: _tree_node(m)["attrs"]["tree_"].update({"$t": "scalar"}),
    "unknown tag": lambda m: m["state"]["attrs"].update(x={"$t": "pickle", "v": "cos\nsystem"}),
    "unregistered class": lambda m: _tree_node(m).update({"class": "builtins.eval"}),
    "class mismatch": lambda m: m.update({"class": "engine.Other"}),
    "bad attribute name": lambda m: m["state"]["attrs"].update({"not valid": 1}),
    "deep nesting": lambda m: m["state"]["attrs"].update(deep=json.loads("[" * 500 + "]" * 500)),
    "huge pool size": lambda m: m["state"]["attrs"]["_seed_sequence"].update(pool_size=2**40),
    "negative entropy": lambda m: m["state"]["attrs"]["_seed_sequence"].update(entropy=-1),
    "object array shape": lambda m: m["state"]["attrs"]["labels_"].update(shape=[10**9]),
    "object array item": lambda m: m["state"]["attrs"]["labels_"].update(v=[[1], 2, 3, 4]),
    "unhashable key": lambda m: m["state"]["attrs"]["class_weight"]["v"].append([[], 1]),
    "bad float": lambda m: m["state"]["attrs"]["scores_"]["v"].update(
        oob={"$t": "float", "v": "x"}
    ),
    "data length": lambda m: m.update(data_nbytes=m["data_nbytes"] + 8),
    "version mismatch": lambda m: m.update(format_version=[1, 1]),
    "state not a dict": lambda m: m.update(state=[]),
}


@pytest.mark.parametrize("forgery", FORGERIES)
def test_forged_manifests_are_a_format_error(small_model: bytes, forgery: str) -> None:
    major, minor, manifest, region = _split(small_model)
    FORGERIES[forgery](manifest)
    with pytest.raises(ModelFormatError):
        load_model(_build(manifest, region, major, minor))


@pytest.mark.parametrize(("dtype", "bad"), [("|b1", b"\x02"), ("<U1", b"\x00\x00\x11\x00")])
def test_impossible_array_contents_are_a_format_error(dtype: str, bad: bytes) -> None:
    manifest = {
        "format": "coppice-model",
        "format_version": [1, 0],
        "class": "x",
        "saved_with": {},
        "arrays": [{"dtype": dtype, "shape": [1], "offset": 0, "nbytes": len(bad)}],
        "data_nbytes": 8,
        "state": {"$t": "array", "ref": 0},
    }
    with pytest.raises(ModelFormatError, match="arrays\\[0\\]"):
        load_model(_build(manifest, bad.ljust(8, b"\0")))


def test_a_newer_minor_version_still_loads(small_model: bytes) -> None:
    _, _, manifest, region = _split(small_model)
    manifest["format_version"] = [1, 9]
    manifest["added_in_1_9"] = {"ignored": True}
    assert isinstance(load_model(_build(manifest, region, 1, 9)), FakeForest)


# Replacement values for the manifest fuzz: wrong types, extremes, tags and nesting.
_JUNK = [None, True, -1, 0, 2**64, 1.5e308, "", "x", "<f8", [], [0], [[]], {}, {"$t": "object"}]


def _nodes(tree: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) in a JSON tree, for the fuzz to replace or delete."""
    found = []
    items = tree.items() if isinstance(tree, dict) else enumerate(tree)
    for key, value in list(items):
        found.append((tree, key))
        if isinstance(value, dict | list):
            found.extend(_nodes(value))
    return found


def test_manifest_fuzz_never_raises_anything_but_format_error(small_model: bytes) -> None:
    major, minor, original, region = _split(small_model)
    text = json.dumps(original)
    rng = random.Random(7)
    outcomes = {"error": 0, "loaded": 0}
    for case in range(3000):
        if case % 3 == 0:  # byte-level damage to the JSON text itself
            damaged = bytearray(text.encode())
            damaged[rng.randrange(len(damaged))] = rng.randrange(32, 127)
            forged: Any = bytes(damaged)
        else:  # structural damage: replace or delete one node of the tree
            forged = json.loads(text)
            container, key = rng.choice(_nodes(forged))
            if isinstance(container, dict) and rng.random() < 0.3:
                del container[key]
            else:
                container[key] = rng.choice(_JUNK)
        try:
            load_model(_build(forged, region, major, minor))
        except ModelFormatError:
            outcomes["error"] += 1
        else:
            outcomes["loaded"] += 1
    assert outcomes["error"] > 1000 and outcomes["loaded"] > 0
