"""Bad command lines fail fast with one clear line; configs compose; registries match conf/."""

import pytest
import yaml

from zoo import catalog
from zoo.config import ConfigError, flatten, options, precheck, validate_train

from conftest import ROOT, compose, run_python


@pytest.mark.parametrize("argv, expected", [
    (["model=nope"], "Unknown model 'nope'. Available: aoa_reader, bahdanau, coattention_reader, listen_attend_spell, luong, memory_network, nadaraya_watson, recurrent_attention, relation_reader, self_attentive_reader, seq2seq, show_attend_tell, transformer"),
    (["trainer.epochs=abc"], "trainer.epochs='abc' is not valid: expected an integer"),
    (["data=fra"], f"Unknown data 'fra'. Available: {', '.join(catalog.datasets())}"),
    (["trainer.epochz=3"], "Unknown key 'trainer.epochz'. Keys in trainer: epochs,"),
    (["model.hidden_size=0"], "model.hidden_size=0 is not valid: expected a positive integer"),
    (["-m", "model=bahdanau,nope"], "Unknown model 'nope'"),
    (["+model.attention_options.bogus=1"], "Unknown option 'bogus' for attention 'additive'"),
    (["model.attention=nope"], "model.attention=nope is not an attention. Available: additive, concat,"),
    (["model.attention=self_attentive"], "model.attention=self_attentive does not work with model bahdanau"),
    (["model=transformer", "model.attention=dot"], "model.attention=dot is not a self-attention"),
    (["-m", "model.attention=dot,general"], "model.attention=dot scores h_t^T h_s, so the query and the memory must be "
                                            "equally wide; model=bahdanau's query (model.hidden_size) is 128 wide"),
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
                                  ["model=luong", "model.attention=concat"], ["-m", "model=luong", "model.attention=dot,general"],
                                  ["model=bahdanau", "model.attention=dot", "model.bidirectional=false"],
                                  ["-m", "model=bahdanau", "seed=1,2"],
                                  ["-m", "model=seq2seq,bahdanau,luong", "trainer.jit_compile=true"]])
def test_precheck_accepts_good_command_lines(argv):
    assert precheck(argv) is None


@pytest.mark.parametrize("argv, expected", [
    (["model=nope"], "error: Unknown model 'nope'. Available: aoa_reader, bahdanau, coattention_reader, listen_attend_spell, luong, memory_network, nadaraya_watson, recurrent_attention, relation_reader, self_attentive_reader, seq2seq, show_attend_tell, transformer, transformer_classifier, vision_transformer"),
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
        module = importlib.import_module(zoo.models.MODELS.get(name).__module__)  # zoo/models/<family>/<name>.py
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



def test_declared_choices_are_refused_before_tensorflow_and_by_the_constructor_alike(tmp_path):
    """Every ``one_of`` rule a model declares (cell, positions, activation, encoding, mode,
    combination): the validator refuses a wrong value with the allowed ones and the nearest, and
    the constructor, through the training stage, refuses the same value with one line."""
    import inspect
    import zipfile

    from zoo.errors import ConfigError
    from zoo.training.model import create_model

    with zipfile.ZipFile(tmp_path / "fsdd.zip", "w") as archive:  # the validator reads its directory only
        archive.writestr("recordings/0_ann_0.wav", b"")
    seen = set()
    for name in catalog.models():
        for rule in catalog.model_constraints(name):
            if rule["rule"] != "one_of" or rule.get("when"):  # a rule under a condition: its own model's tests
                continue
            key, allowed = rule["key"], rule["values"]
            defaults = yaml.safe_load((ROOT / "conf" / "model" / f"{name}.yaml").read_text())
            seen.add(key)
            data = {"qa": ["data=story_qa"], "regression": ["data=kernel_regression"],
                    "classify": ["data=listops"], "image": ["data=digit_strings"],
                    "speech": ["data=spoken_digits", f"data.path={tmp_path / 'fsdd.zip'}"]}.get(catalog.model_task(name), [])
            message = precheck([f"model={name}", *data, f"model.{key}={allowed[0]}x"])
            assert message == (f"model.{key}='{allowed[0]}x' is not valid: expected one of "
                               f"{', '.join(repr(a) for a in allowed)}; e.g. model.{key}={allowed[0]} "
                               f"(default: {defaults[key]!r})."), message
            assert precheck([f"model={name}", *data, f"model.{key}={allowed[-1]}"]) is None
            import zoo.models

            wanted = inspect.signature(zoo.models.MODELS.get(name)).parameters
            sizes = {k: 9 for k in ("source_vocab_size", "target_vocab_size", "vocab_size", "memory_size",
                                    "num_classes", "num_mels") if k in wanted}
            with pytest.raises(ConfigError, match=rf"^model\.{key}='{allowed[0]}x' is not valid for model={name}: "
                                                  rf"expected one of '{allowed[0]}', "):
                create_model(name, **sizes, **{key: f"{allowed[0]}x"})
    assert {"cell", "positions", "activation", "encoding", "mode", "combination"} <= seen



@pytest.mark.parametrize("data, key, bad", [("dates", "train_size", 0), ("dates", "min_year", 2100),
                                            ("reverse", "mode", "rev"), ("reverse", "min_length", 0),
                                            ("story_qa", "max_sentences", 51), ("story_qa", "kinds", ["where"]),
                                            ("kernel_regression", "step", 0)])
def test_declared_data_rules_are_refused_before_tensorflow_and_by_the_builder_alike(data, key, bad):
    """A dataset's CONSTRAINTS, read from its file by the validator, are the module's own, and
    ``build_task`` refuses the same value with the same line (less the default)."""
    import importlib

    import zoo.data
    from zoo.config import problems
    from zoo.errors import ConfigError

    module = importlib.import_module(f"zoo.data.{data}")
    assert catalog.data_constraints(data) == module.CONSTRAINTS
    model = {"qa": ["model=aoa_reader"], "regression": ["model=nadaraya_watson"]}.get(catalog.data_task(data), [])
    shown = f"[{','.join(bad)}]" if isinstance(bad, list) else bad
    (line,) = problems([f"data={data}", *model, f"data.{key}={shown}"])
    assert line.startswith(f"data.{key}={bad!r} is not valid: expected ") and "(default: " in line, line
    with pytest.raises(ConfigError) as refused:
        zoo.data.DATASETS.create(data, **{key: bad})
    assert str(refused.value) == line[:line.index(" (default: ")] + ".", line


def test_every_problem_is_reported_at_once():
    from zoo.config import problems

    found = problems(["trainer.epochs=0", "model.embed_dim=0", "trainer.epochz=1", "optimizer.name=rmsprop",
                      "decoding=sample", "decoding.top_p=2"])
    keys = ["trainer.epochz", "model.embed_dim", "trainer.epochs", "optimizer.name", "decoding.top_p"]
    assert len(found) == len(keys), found
    for key, line in zip(keys, found):
        assert line.startswith(f"{key}=") or f"'{key}'" in line, (key, line)
        assert "\n" not in line


def test_attention_options_are_checked_against_the_layers_declared_rules_before_tensorflow_and_after():
    """An attention's CONSTRAINTS, read from its module (found by its ``@register_attention`` name)
    without importing it, are the module's own; each rule's key is an option of
    ``conf/attention/<name>.yaml``; the validator and, through the training stage, the layer refuse
    ``window_size=0`` naming ``model.attention_options.window_size``."""
    import importlib

    import zoo.attention  # noqa: F401 - registers every layer
    from zoo.attention import base_attention
    from zoo.attention.base_attention import ATTENTIONS, BaseAttention
    from zoo.errors import ConfigError
    from zoo.training.model import create_model

    declared = {}
    for name in catalog.options("attention"):
        layer = ATTENTIONS.get(name)
        module = importlib.import_module(layer.__module__)
        inherited = ()  # BaseAttention's rules (normalizer), for the alignment layers that take it
        if issubclass(layer, BaseAttention) and len(layer.normalizers) > 1:
            inherited = base_attention.CONSTRAINTS
        assert catalog.attention_constraints(name) == inherited + tuple(getattr(module, "CONSTRAINTS", ())), name
        options = yaml.safe_load((ROOT / "conf" / "attention" / f"{name}.yaml").read_text())
        for rule in catalog.attention_constraints(name):
            assert rule["key"] in options, (name, rule)
            declared[name] = rule
    assert {"local_m", "local_p"} <= set(declared)
    for name in ("local_m", "local_p"):
        line = precheck(["model=luong", f"model.attention={name}", "+model.attention_options.window_size=0"])
        assert line.startswith("model.attention_options.window_size=0 is not valid: expected an integer >= 1"), line
        assert line.endswith("e.g. model.attention_options.window_size=1 (default: 10)."), line
        assert precheck(["model=luong", f"model.attention={name}", "model.attention_options.window_size=1"]) is None
        with pytest.raises(ConfigError, match=r"^model\.attention_options\.window_size=0 is not valid for model=luong"):
            create_model("luong", source_vocab_size=9, target_vocab_size=9, attention=name,
                         attention_options={"window_size": 0})


@pytest.mark.parametrize("overrides, bound", [
    (["data=dates"], 12), (["data=reverse"], 27), (["data=reverse", "data.alphabet=abc"], 4),
    (["data=tatoeba", "data.path=x", "data.max_size=10"], 7), (["data=tatoeba", "data.path=x"], None),
    (["data=tatoeba", "data.path=x", "data.max_size=10", "data.tokenizer=wordpiece"], None),
    (["data=dates", "data.tokenizer=word"], None)])
def test_the_beam_is_bounded_by_the_vocabulary_the_data_config_allows(overrides, bound):
    """The most continuations of ``<bos>`` (content tokens and ``<eos>``) known from the data's config:
    a beam wider than that is refused before TensorFlow; where only the built vocabulary tells, the
    check comes after it is built (``zoo.training.data.load_data``)."""
    from zoo.config import target_vocabulary_bound
    from zoo.tokens import SPECIALS

    found = target_vocabulary_bound(compose(overrides).data)
    assert (found[0] - len(SPECIALS) + 1 if found else None) == bound


def test_the_bound_of_dates_is_that_of_its_built_vocabulary():
    """ISO dates' 11 symbols are the declared bound, and the built target vocabulary holds exactly them."""
    from zoo.config import target_vocabulary_bound
    from zoo.data import load_task

    task = load_task({"name": "dates", "train_size": 200, "val_size": 10, "test_size": 10, "seed": 0})
    assert task.target_tokenizer.vocab_size == target_vocabulary_bound(compose(["data=dates"]).data)[0] == 15
