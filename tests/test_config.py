"""Bad command lines fail fast with one clear line; configs compose; registries match conf/."""

import pytest

from zoo import catalog
from zoo.config import ConfigError, flatten, options, precheck, validate_train

from conftest import compose, run_python


@pytest.mark.parametrize("argv, expected", [
    (["model=nope"], "Unknown model 'nope'. Available: aoa_reader, bahdanau, coattention_reader, luong, memory_network, nadaraya_watson, relation_reader, self_attentive_reader, seq2seq, transformer"),
    (["trainer.epochs=abc"], "trainer.epochs='abc' is not valid: expected an integer"),
    (["data=fra"], f"Unknown data 'fra'. Available: {', '.join(catalog.datasets())}"),
    (["trainer.epochz=3"], "Unknown key 'trainer.epochz'. Keys in trainer: epochs,"),
    (["model.hidden_size=0"], "model.hidden_size=0 is not valid: expected a positive integer"),
    (["-m", "model=bahdanau,nope"], "Unknown model 'nope'"),
    (["+model.attention_options.bogus=1"], "Unknown option 'bogus' for attention 'additive'"),
    (["model.attention=nope"], "model.attention=nope is not an attention. Available: additive, concat,"),
    (["model.attention=self_attentive"], "model.attention=self_attentive does not work with model bahdanau"),
    (["model=transformer", "model.attention=dot"], "model.attention: this model has no attention to choose"),
    (["model.attention_options.bogus=1"], "Unknown option 'bogus' for attention 'additive'. Available: units,"),
    (["model=luong", "model.attention=dot", "model.attention_options.units=3"], "Unknown option 'units' for attention 'dot'"),
    (["model=transformer", "model.hidden_size=64"], "model.hidden_size was renamed for model transformer: use model.intermediate_dim"),
    (["model=transformer", "model.intermediate_dim=0"], "model.intermediate_dim=0 is not valid: expected a positive integer"),
    (["seed=x"], "seed='x' is not valid: expected an integer"),
])
def test_precheck_names_the_value_and_the_fix(argv, expected):
    message = precheck(argv)
    assert message is not None and message.startswith(expected), message
    assert "\n" not in message


@pytest.mark.parametrize("argv", [[], ["model=bahdanau"], ["debug=smoke", "optimizer.learning_rate=1e-3"],
                                  ["+model.attention_options.units=16"], ["model.attention_options.units=16"],
                                  ["model=luong", "model.attention=concat"], ["-m", "model.attention=dot,general"],
                                  ["-m", "model=bahdanau", "seed=1,2"],
                                  ["-m", "model=seq2seq,bahdanau,luong", "trainer.jit_compile=true"]])
def test_precheck_accepts_good_command_lines(argv):
    assert precheck(argv) is None


@pytest.mark.parametrize("argv, expected", [
    (["model=nope"], "error: Unknown model 'nope'. Available: aoa_reader, bahdanau, coattention_reader, luong, memory_network, nadaraya_watson, relation_reader, self_attentive_reader, seq2seq, transformer"),
    (["trainer.epochs=abc"], "error: trainer.epochs='abc' is not valid: expected an integer (default: 20)."),
])
def test_train_py_exits_with_one_line_and_no_traceback(argv, expected):
    result = run_python(["train.py", *argv])
    assert result.returncode != 0
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert lines == [expected], result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_evaluate_py_needs_a_run_or_a_directory(tmp_path):
    result = run_python(["evaluate.py", f"saved_model={tmp_path}"], env_extra={
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"})
    assert result.returncode != 0
    assert "is not a SavedModel directory" in result.stderr and "Traceback" not in result.stderr


def test_defaults_compose_and_validate():
    cfg = compose([])
    validate_train(cfg)
    assert cfg.model.name == "bahdanau" and cfg.data.name == "dates"
    flat = flatten(cfg)
    assert flat["model.hidden_size"] == cfg.model.hidden_size and flat["trainer.epochs"] == cfg.trainer.epochs


def test_validation_rejects_inconsistent_values():
    cfg = compose(["optimizer.learning_rate=-1"])
    with pytest.raises(ConfigError, match="optimizer.learning_rate=-1"):
        validate_train(cfg)


def test_attention_options_are_composed_by_hydra():
    cfg = compose(["model=luong", "model.attention=concat", "model.attention_options.units=16"])
    validate_train(cfg)
    assert cfg.model.attention == "concat"
    assert cfg.model.attention_options.name == "concat" and cfg.model.attention_options.units == 16
    assert set(cfg.model.attention_options) == {"name", "kind", *compose(["model=luong", "model.attention=concat"])
                                                .model.attention_options}


def test_the_catalog_equals_the_registries():
    """The TensorFlow-free lists the validator reads are the live registries' names."""
    import zoo.attention
    import zoo.data
    import zoo.data.tokenizers
    import zoo.decoding
    import zoo.models

    assert zoo.models.names() == options("model") == catalog.models()
    assert zoo.models.names("regression") == catalog.models("regression")
    assert zoo.attention.names() == catalog.attentions()
    assert zoo.attention.alignment_names() == catalog.attentions("alignment")
    assert zoo.data.DATASETS.names() == catalog.datasets()
    assert zoo.data.tokenizers.names() == catalog.tokenizers()
    assert tuple(zoo.decoding.STRATEGIES) == catalog.DECODING_STRATEGIES


def test_declared_size_rules_are_read_without_importing_and_used_by_the_constructors():
    """The validator reads each model's CONSTRAINTS from its file (no Keras); it is the literal the
    module holds, and the constructor refuses what the validator refuses, with the same rule."""
    import importlib

    import zoo.models

    for name in catalog.models():
        module = importlib.import_module(f"zoo.models.{name}")
        assert catalog.model_constraints(name) == tuple(getattr(module, "CONSTRAINTS", ())), name
    assert catalog.model_constraints("transformer") and catalog.model_constraints("luong")
    for name, sizes in [("transformer", {"embed_dim": 100, "num_heads": 3}),
                        ("transformer", {"embed_dim": 6, "num_heads": 2, "positions": "rotary"}),
                        ("luong", {"hidden_size": 7})]:
        message = precheck([f"model={name}", *(f"model.{k}={v}" for k, v in sizes.items())])
        assert message and ("expected a multiple of" in message or "an even integer" in message), message
        with pytest.raises(ValueError, match=r"Received: (embed_dim|hidden_size)="):
            zoo.models.create(name, source_vocab_size=9, target_vocab_size=9, **sizes)
    for name, sizes in [("transformer", {"embed_dim": 12, "num_heads": 3, "positions": "sinusoidal"}),
                        ("transformer", {"embed_dim": 12, "num_heads": 3, "positions": "rotary"})]:
        args = [f"model={name}", *(f"model.{k}={v}" for k, v in sizes.items())]
        assert precheck(args) is None
        zoo.models.create(name, source_vocab_size=9, target_vocab_size=9, **sizes)


def test_every_problem_is_reported_at_once():
    from zoo.config import problems

    found = problems(["trainer.epochs=0", "model.embed_dim=0", "trainer.epochz=1", "optimizer.name=rmsprop",
                      "decoding=sample", "decoding.top_p=2"])
    keys = ["trainer.epochz", "model.embed_dim", "trainer.epochs", "optimizer.name", "decoding.top_p"]
    assert len(found) == len(keys), found
    for key, line in zip(keys, found):
        assert line.startswith(f"{key}=") or f"'{key}'" in line, (key, line)
        assert "\n" not in line
