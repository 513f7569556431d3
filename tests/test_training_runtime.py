"""Runtime: the engine's trainer keys are checked before TensorFlow, device and precision are set."""

import pytest

from zoo.errors import ConfigError

from conftest import compose


@pytest.mark.parametrize("override, message", [
    ("trainer.strategy=horovod", "trainer.strategy=horovod is not valid. Available: default, mirrored, multi_worker"),
    ("trainer.precision=float8", "trainer.precision=float8 is not valid. Available: float32, mixed_bfloat16"),
    ("trainer.device=tpu", "trainer.device=tpu is not valid. Available: auto, cpu, gpu"),
    ("trainer.checkpoint_every_steps=0", "trainer.checkpoint_every_steps=0 is not valid"),
    ("trainer.keep_checkpoints=0", "trainer.keep_checkpoints=0 is not valid"),
])
def test_bad_engine_values_are_one_line(override, message):
    from zoo.training.runtime import check_trainer

    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        check_trainer(compose(["debug=smoke", override]).trainer)


def test_multi_worker_without_tf_config_is_refused(monkeypatch):
    from zoo.training.runtime import check_trainer

    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ConfigError, match="needs TF_CONFIG"):
        check_trainer(compose(["debug=smoke", "trainer.strategy=multi_worker"]).trainer)


def test_device_auto_says_what_it_picked_and_gpu_without_one_is_an_error(capsys):
    import tensorflow as tf

    from zoo.training.runtime import reset_policy, setup

    runtime = setup(compose(["debug=smoke"]).trainer, 0)
    assert "trainer.device=auto:" in capsys.readouterr().out
    assert runtime.replicas == 1 and runtime.is_chief and runtime.pipelines == 1
    if not tf.config.list_physical_devices("GPU"):
        with pytest.raises(ConfigError, match="trainer.device=gpu but TensorFlow sees no GPU"):
            setup(compose(["debug=smoke", "trainer.device=gpu"]).trainer, 0)
    runtime = setup(compose(["debug=smoke", "trainer.precision=mixed_bfloat16"]).trainer, 0)
    import keras

    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    reset_policy()
    assert keras.mixed_precision.global_policy().name == "float32"
