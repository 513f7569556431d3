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
    ("trainer.inter_op_threads=two", "trainer.inter_op_threads='two' is not valid: expected a positive integer or null"),
    ("trainer.onednn=sometimes", "trainer.onednn='sometimes' is not valid: expected true or false or null"),
])
def test_bad_engine_values_are_one_line(override, message):
    from zoo.config import trainer_problems

    found = trainer_problems(compose(["debug=smoke", override]).trainer)
    assert len(found) == 1 and message in found[0], found


def test_multi_worker_without_tf_config_is_refused(monkeypatch):
    from zoo.config import trainer_problems

    monkeypatch.delenv("TF_CONFIG", raising=False)
    found = trainer_problems(compose(["debug=smoke", "trainer.strategy=multi_worker"]).trainer)
    assert len(found) == 1 and "needs TF_CONFIG" in found[0], found


def test_what_a_task_kind_cannot_train_with_is_read_from_its_module_and_refused_before_tensorflow():
    """``TRAINER_CONSTRAINTS`` of ``zoo/training/<task>.py``, read from the file by the validator
    (``zoo.catalog.task_trainer_constraints``), equal the imported module's; the validator refuses them
    one line a key, and passes each kind's defaults."""
    import importlib

    from zoo import catalog
    from zoo.config import train_problems

    for task in ("qa", "classify", "image"):
        assert catalog.task_trainer_constraints(task) == importlib.import_module(f"zoo.training.{task}").TRAINER_CONSTRAINTS
    assert [r["key"] for r in catalog.task_trainer_constraints("image")] == ["strategy", "precision", "jit_compile"]
    assert catalog.task_trainer_constraints("seq2seq") == catalog.task_trainer_constraints("regression") == ()
    image = ["model=show_attend_tell", "data=digit_strings", "debug=smoke", "model.hidden_size=16"]
    assert train_problems(compose(image)) == []
    found = train_problems(compose([*image, "trainer.precision=mixed_bfloat16", "trainer.jit_compile=true"]))
    assert [line.split(" does not work with model=show_attend_tell (task: image): ")[0] for line in found] == \
        ["trainer.precision=mixed_bfloat16", "trainer.jit_compile=true"], found
    assert train_problems(compose(["model=transformer", "debug=smoke", "trainer.precision=mixed_bfloat16",
                                   "trainer.jit_compile=true"])) == []  # translation trains with both


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


def test_engine_settings_apply_in_a_fresh_process_and_are_refused_once_tensorflow_runs():
    """In one new Python, as ``setup`` does first: ``trainer.onednn=false`` sets ``TF_ENABLE_ONEDNN_OPTS=0``
    before TensorFlow is imported, and TensorFlow runs without its oneDNN kernels; ``trainer.intra_op_threads``
    / ``inter_op_threads`` reach TensorFlow when set before its runtime starts. Asking for another value
    of either afterwards is one ConfigError line that names the state in force and the command, not a
    silent no-op."""
    from conftest import run_python

    code = ("import os\n"
            "from zoo.errors import ConfigError\n"
            "from zoo.environ import onednn_enabled, set_onednn, set_threads\n"
            "set_onednn(False)\n"
            "print('env', os.environ['TF_ENABLE_ONEDNN_OPTS'])\n"
            "import tensorflow as tf\n"
            "set_threads(1, 2)\n"
            "t = tf.config.threading\n"
            "print('threads', t.get_intra_op_parallelism_threads(), t.get_inter_op_parallelism_threads())\n"
            "print('onednn', onednn_enabled())\n"
            "print('sum', float(tf.reduce_sum(tf.ones([3]))))\n"
            "set_threads(1, None)\n"  # the value in force: no refusal
            "set_onednn(False)\n"
            "for call in (lambda: set_threads(2, None), lambda: set_onednn(True)):\n"
            "    try:\n"
            "        call()\n"
            "    except ConfigError as error:\n"
            "        print('refused', error)\n")
    done = run_python(["-c", code], timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    threads, onednn = [line for line in lines if line.startswith("refused ")]
    assert "env 0" in lines and "threads 1 2" in lines and "onednn False" in lines and "sum 3.0" in lines
    assert "trainer.intra_op_threads=2 cannot take effect" in threads
    assert "(with 1)" in threads and "python train.py trainer.intra_op_threads=2" in threads
    assert "trainer.onednn=true cannot take effect" in onednn and "(oneDNN is off in this process)" in onednn
    assert "python train.py trainer.onednn=true" in onednn
