"""Stage ``model``: the registered model and its optimizer, built under the strategy; float16
gets loss scaling; the float32 copy for export has the same weights and float32 outputs."""

import numpy as np

from conftest import compose


def built(overrides):
    from zoo.training.data import load_data
    from zoo.training.model import build
    from zoo.training.runtime import setup

    cfg = compose(["debug=smoke", *overrides])
    runtime = setup(cfg.trainer, 0)
    data = load_data(cfg)
    return cfg, data.task, *build(cfg, data.task, runtime)


def test_model_and_optimizer_are_built_before_the_first_step():
    import keras

    cfg, task, model, optimizer = built([])
    assert model.built and optimizer.built and optimizer.clipnorm == 1.0
    assert not isinstance(optimizer, keras.optimizers.LossScaleOptimizer)


def test_float16_scales_the_loss_and_the_export_copy_is_float32():
    import keras

    from zoo.training.model import float32_copy, weights_digest
    from zoo.training.runtime import reset_policy

    try:
        cfg, task, model, optimizer = built(["trainer.precision=mixed_float16"])
        assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        assert model.compute_dtype == "float16"
        copy = float32_copy(cfg, task, model)
    finally:
        reset_policy()
    assert copy.compute_dtype == "float32" and weights_digest(copy) == weights_digest(model)
    source = np.array([[5, 6, 3]], dtype="int32")
    target = np.array([[2, 4]], dtype="int32")
    assert keras.ops.convert_to_numpy(copy((source, target))).dtype == np.float32


def _apply_steps(optimizer, grads_per_step, init):
    import keras
    import tensorflow as tf

    variables = [keras.Variable(value) for value in init]
    optimizer.build(variables)
    step = tf.function(lambda grads: optimizer.apply_gradients(zip(grads, variables)), autograph=False)
    for grads in grads_per_step:
        step(grads)
    return [v.numpy() for v in variables], step


def test_fused_adam_and_adamw_give_keras_numbers_in_one_kernel_per_variable():
    """zoo.training.optimizers: ResourceApplyAdam per variable, Keras' Adam/AdamW numbers (clipping
    and weight decay included). An embedding's IndexedSlices gradient, whose repeated rows Keras
    squares one by one (``v`` gets ``a^2 + b^2``, not ``(a + b)^2``), is Adam on the dense gradient."""
    import keras
    import tensorflow as tf

    from zoo.training import optimizers

    rng = np.random.default_rng(0)
    init = [rng.normal(size=(6, 4)).astype("float32"), rng.normal(size=(4,)).astype("float32")]

    def rows(indices):
        return tf.IndexedSlices(tf.constant(rng.normal(size=(len(indices), 4)).astype("float32")),
                                tf.constant(indices), tf.constant([6, 4]))

    unique = [[rows([0, 2, 5]), tf.constant(rng.normal(size=(4,)).astype("float32"))] for _ in range(4)]
    repeated = [[rows([0, 2, 2]), tf.constant(rng.normal(size=(4,)).astype("float32"))] for _ in range(4)]
    densified = [[tf.convert_to_tensor(g) for g in grads] for grads in repeated]
    for fused, reference, extra in ((optimizers.Adam, keras.optimizers.Adam, {}),
                                    (optimizers.AdamW, keras.optimizers.AdamW, {"weight_decay": 0.1})):
        for got_grads, want_grads in ((unique, unique), (repeated, densified)):
            optimizer = fused(learning_rate=0.01, clipnorm=1.0, **extra)  # the fused kernel at every size
            got, step = _apply_steps(optimizer, got_grads, init)
            want, _ = _apply_steps(reference(learning_rate=0.01, clipnorm=1.0, **extra), want_grads, init)
            for g, w, start in zip(got, want, init):
                assert not np.allclose(g, start)
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        graph = step.get_concrete_function(repeated[0]).graph
        kinds = [op.type for op in graph.get_operations()]
        assert kinds.count("ResourceApplyAdam") == 2
        # beta_1^t and beta_2^t once per step, shared by the variables; clipping takes no where/select,
        # and the clipping scales of both gradients come from one rsqrt of their two norms
        assert kinds.count("Pow") == 2 and "SelectV2" not in kinds and "Select" not in kinds
        assert kinds.count("L2Loss") == 2 and kinds.count("Rsqrt") == 1
        # with a size threshold above them, variables this small take Keras' update, on the dense gradient
        optimizer = fused(learning_rate=0.01, clipnorm=1.0, **extra)
        optimizer.fused_min_size = 1 << 20
        got, step = _apply_steps(optimizer, repeated, init)
        graph = step.get_concrete_function(repeated[0]).graph
        assert not any(op.type == "ResourceApplyAdam" for op in graph.get_operations())
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
