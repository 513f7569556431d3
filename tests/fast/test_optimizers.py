"""``zoo.fast.optimizers``: Adam and AdamW with ``ResourceApplyAdam`` per variable equal the reference
(Keras' Adam/AdamW on the dense gradient) in the weights after three steps, with clipping, weight
decay and an embedding's repeated rows; the step's scalars once per step; and where Keras' private
slots are missing, one warning line and the reference's update."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo import kernels
from zoo.fast import optimizers as fast_optimizers
from zoo.training import optimizers

RNG = np.random.default_rng(0)
INIT = [RNG.normal(size=(6, 4)).astype("float32"), RNG.normal(size=(4,)).astype("float32")]
EXTRA = {"adam": {}, "adamw": {"weight_decay": 0.1}}


def _rows(indices):
    """An embedding's gradient: one row per occurrence of a token."""
    return tf.IndexedSlices(tf.constant(RNG.normal(size=(len(indices), 4)).astype("float32")),
                            tf.constant(indices), tf.constant([6, 4]))


UNIQUE = [[_rows([0, 2, 5]), tf.constant(RNG.normal(size=(4,)).astype("float32"))] for _ in range(3)]
REPEATED = [[_rows([0, 2, 2]), tf.constant(RNG.normal(size=(4,)).astype("float32"))] for _ in range(3)]


def _make(mode, name, **extra):
    with kernels.using(mode):
        optimizer = optimizers.create(name, 0.01, clipnorm=1.0)
    for key, value in extra.items():
        setattr(optimizer, key, value)
    return optimizer


def _apply_steps(optimizer, grads_per_step):
    variables = [keras.Variable(value) for value in INIT]
    optimizer.build(variables)
    step = tf.function(lambda grads: optimizer.apply_gradients(zip(grads, variables)), autograph=False)
    for grads in grads_per_step:
        step(grads)
    return [v.numpy() for v in variables], step


def _ops(step, grads):
    return [op.type for op in step.get_concrete_function(grads).graph.get_operations()]


def test_create_gives_the_fused_classes_in_fast_mode_only():
    for name, fused, reference in (("adam", fast_optimizers.FusedAdam, optimizers.Adam),
                                   ("adamw", fast_optimizers.FusedAdamW, optimizers.AdamW)):
        assert type(_make("fast", name)) is fused and type(_make("reference", name)) is reference
    assert type(_make("fast", "sgd")) is type(_make("reference", "sgd")) is keras.optimizers.SGD
    with pytest.raises(ValueError, match="Unknown optimizer 'adagrad'. Available: adam, adamw, sgd"):
        optimizers.create("adagrad", 0.01)


@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_the_reference_is_keras_on_the_dense_gradient(name):
    """Keras' own optimizer given the summed rows: what the reference computes (Keras squares an
    ``IndexedSlices`` gradient's rows one by one)."""
    keras_class = {"adam": keras.optimizers.Adam, "adamw": keras.optimizers.AdamW}[name]
    densified = [[tf.convert_to_tensor(g) for g in grads] for grads in REPEATED]
    got, _ = _apply_steps(_make("reference", name, **EXTRA[name]), REPEATED)
    want, _ = _apply_steps(keras_class(learning_rate=0.01, clipnorm=1.0, **EXTRA[name]), densified)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["adam", "adamw"])
@pytest.mark.parametrize("grads", [UNIQUE, REPEATED], ids=["unique-rows", "repeated-rows"])
def test_fast_equals_reference_after_three_steps_in_one_kernel_per_variable(name, grads):
    got, step = _apply_steps(_make("fast", name, **EXTRA[name]), grads)
    want, reference_step = _apply_steps(_make("reference", name, **EXTRA[name]), grads)
    for g, w, start in zip(got, want, INIT):
        assert not np.allclose(g, start)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    kinds = _ops(step, grads[0])
    assert kinds.count("ResourceApplyAdam") == 2 and "ResourceApplyAdam" not in _ops(reference_step, grads[0])
    # beta_1^t and beta_2^t once per step, shared by the variables; clipping takes no where/select,
    # and the clipping scales of both gradients come from one rsqrt of their two norms
    assert kinds.count("Pow") == 2 and "SelectV2" not in kinds and "Select" not in kinds
    assert kinds.count("L2Loss") == 2 and kinds.count("Rsqrt") == 1


def test_variables_under_the_size_threshold_take_keras_update():
    optimizer = _make("fast", "adam", fused_min_size=1 << 20)
    got, step = _apply_steps(optimizer, REPEATED)
    want, _ = _apply_steps(_make("reference", "adam"), REPEATED)
    assert "ResourceApplyAdam" not in _ops(step, REPEATED[0])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_keras_without_the_private_slots_gets_one_warning_and_the_reference(monkeypatch, capsys):
    """A Keras release that keeps Adam's moments under other names (simulated: its ``build`` stores
    them as ``_first_moments`` / ``_second_moments``, its ``update_step`` reads them there): the fused
    optimizer checks at ``build``, warns in one line, and trains as the reference does."""
    build, update_step = keras.optimizers.Adam.build, keras.optimizers.Adam.update_step

    def renamed_build(self, variables):
        build(self, variables)
        self.__dict__["_first_moments"] = self.__dict__.pop("_momentums")
        self.__dict__["_second_moments"] = self.__dict__.pop("_velocities")

    def renamed_update_step(self, gradient, variable, learning_rate):
        self.__dict__.update(_momentums=self._first_moments, _velocities=self._second_moments)
        try:
            update_step(self, gradient, variable, learning_rate)
        finally:
            del self.__dict__["_momentums"], self.__dict__["_velocities"]

    want = {name: _apply_steps(_make("reference", name, **EXTRA[name]), REPEATED)[0] for name in EXTRA}
    monkeypatch.setattr(keras.optimizers.Adam, "build", renamed_build)
    monkeypatch.setattr(keras.optimizers.Adam, "update_step", renamed_update_step)
    monkeypatch.setattr(fast_optimizers, "_warned", [])
    capsys.readouterr()
    for name in EXTRA:
        optimizer = _make("fast", name, **EXTRA[name])
        assert isinstance(optimizer, fast_optimizers.FusedAdam if name == "adam" else fast_optimizers.FusedAdamW)
        got, step = _apply_steps(optimizer, REPEATED)
        assert "ResourceApplyAdam" not in _ops(step, REPEATED[0])
        for g, w in zip(got, want[name]):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines  # once a process, not once an optimizer
    assert lines[0].startswith("warning: kernels=fast:") and "_momentums, _velocities" in lines[0]
