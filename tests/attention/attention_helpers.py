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

    if kind(name) in ("alignment", "self"):
        return [rand(B, TQ, D), rand(B, TV, D)]
    if kind(name) == "positional":
        return [rand(B, TQ, D)]
    return {
        "self_attentive": lambda: [rand(B, TV, D)],
        "co_attention": lambda: [rand(B, TQ, D), rand(B, TV, D - 1)],
        "attention_over_attention": lambda: [rand(B, TV, D), rand(B, TQ, D)],
        "nadaraya_watson": lambda: [rng.uniform(0, 5, (B, TQ)).astype("float32"),
                                    rng.uniform(0, 5, (B, TV)).astype("float32"), rand(B, TV)],
        "input_attention": lambda: [rand(B, TV, D), rand(B, D), rand(B, D)],
        "location_memory": lambda: [rand(B, TV, D)],
        "key_value_memory": lambda: [rand(B, D), rand(B, TV, D), rand(B, TV, D)],
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


def gradients(layer, loss_fn, inputs=()):
    """Gradients of a scalar loss w.r.t. ``inputs`` and ``layer.trainable_variables``, on any backend.

    ``loss_fn(call, *inputs)`` returns the loss, with ``keras.ops`` only; ``call(*args, **kwargs)``
    calls ``layer``. ``layer`` must be built. TensorFlow: ``tf.GradientTape``; JAX: ``jax.grad``
    through ``layer.stateless_call``. Returns ``(input_grads, variable_grads)``, lists of numpy
    arrays (None where the backend gives no gradient), in the order of ``inputs`` and
    ``layer.trainable_variables``.
    """
    assert layer.built, "build the layer (call it once) before taking gradients"
    inputs = [keras.ops.convert_to_tensor(x) for x in inputs]
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        variables = list(layer.trainable_variables)
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            loss = loss_fn(layer, *inputs)
        grads = tape.gradient(loss, inputs + variables)
    elif backend == "jax":
        import jax

        trainable = [v.value for v in layer.trainable_variables]
        non_trainable = [v.value for v in layer.non_trainable_variables]

        def loss_of(trainable, inputs):
            def call(*args, **kwargs):
                return layer.stateless_call(trainable, non_trainable, *args, **kwargs)[0]

            return loss_fn(call, *inputs)

        variable_grads, input_grads = jax.grad(loss_of, argnums=(0, 1))(trainable, inputs)
        grads = list(input_grads) + list(variable_grads)
    else:
        pytest.skip(f"gradients() supports the tensorflow and jax backends, not {backend}")
    grads = [None if g is None else np.asarray(keras.ops.convert_to_numpy(g)) for g in grads]
    return grads[:len(inputs)], grads[len(inputs):]


ALIGNMENT_NAMES = zoo.attention.alignment_names()
ALL_NAMES = zoo.attention.names()


@pytest.fixture(autouse=True)
def fixed_seed():
    """Imported by every test module (no conftest.py here: tests/conftest.py is imported by name)."""
    keras.utils.set_random_seed(0)
    yield
