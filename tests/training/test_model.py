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
