"""Shared inputs and helpers for the attention layer tests (tiny shapes); imported by the tests."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import zoo.attention  # noqa: E402
from zoo.attention.base_attention import ATTENTIONS  # noqa: E402

B, TQ, TV, D = 2, 4, 5, 6


def kind(name):
    return ATTENTIONS.meta(name)["kind"]


def layer_class(name):
    return ATTENTIONS.get(name)


def sample_inputs(name, seed=0):
    """Positional call arguments for layer ``name`` (numpy float32, tiny shapes)."""
    rng = np.random.default_rng(seed)

    def rand(*shape):
        return rng.normal(size=shape).astype("float32")

    if kind(name) == "alignment":
        return [rand(B, TQ, D), rand(B, TV, D)]
    if kind(name) == "positional":
        return [rand(B, TQ, D)]
    return {
        "self_attentive": lambda: [rand(B, TV, D)],
        "co_attention": lambda: [rand(B, TQ, D), rand(B, TV, D - 1)],
        "attention_over_attention": lambda: [rand(B, TV, D), rand(B, TQ, D)],
        "nadaraya_watson": lambda: [rng.uniform(0, 5, (B, TQ)).astype("float32"),
                                    rng.uniform(0, 5, (B, TV)).astype("float32"), rand(B, TV)],
    }[name]()


def run(name, layer, args, **kwargs):
    """Calls ``layer`` (with attention scores unless positional) and returns numpy outputs as a list."""
    if kind(name) != "positional":
        kwargs.setdefault("return_attention_scores", True)
    outputs = layer(*args, **kwargs)
    outputs = outputs if isinstance(outputs, (tuple, list)) else [outputs]
    return [keras.ops.convert_to_numpy(o) for o in outputs]


def to_numpy(x):
    return keras.ops.convert_to_numpy(x)


ALIGNMENT_NAMES = zoo.attention.alignment_names()
ALL_NAMES = zoo.attention.names()


@pytest.fixture(autouse=True)
def fixed_seed():
    """Imported by every test module (no conftest.py here: tests/conftest.py is imported by name)."""
    keras.utils.set_random_seed(0)
    yield
