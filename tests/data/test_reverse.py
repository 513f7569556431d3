"""data=reverse: random strings -> reversed or copied, deterministic, disjoint splits."""

import pytest

from zoo.data import reverse

from conftest import compose


def test_generation_is_deterministic_for_a_seed():
    assert reverse.generate(300, seed=7) == reverse.generate(300, seed=7)
    assert reverse.generate(300, seed=7) != reverse.generate(300, seed=8)
    assert reverse.splits(50, 10, 10, seed=3) == reverse.splits(50, 10, 10, seed=3)


def test_lengths_and_symbols_stay_in_range():
    sources = reverse.generate(2000, seed=1, min_length=3, max_length=12, alphabet="abc")
    assert {len(s) for s in sources} == set(range(3, 13))
    assert set("".join(sources)) == {"a", "b", "c"}


def test_splits_share_no_source_and_the_tiny_lengths_run_out_without_repeats():
    splits = reverse.splits(3000, 300, 300, seed=1, min_length=1, max_length=8)
    seen = {name: set(src) for name, (src, _) in splits.items()}
    assert [len(s) for s in seen.values()] == [3000, 300, 300]
    assert not seen["train"] & seen["val"] and not seen["train"] & seen["test"] and not seen["val"] & seen["test"]
    assert sum(len(s) == 1 for s in set.union(*seen.values())) <= 26


def test_targets_are_the_sources_reversed_or_copied():
    sources, targets = reverse.splits(20, 5, 5, seed=0)["train"]
    assert targets == [s[::-1] for s in sources]
    assert reverse.transform(["abc", "xy"], "reverse") == ["cba", "yx"]
    copied = reverse.splits(20, 5, 5, seed=0, mode="copy")["train"]
    assert copied[0] == sources and copied[1] == sources


@pytest.mark.parametrize("kwargs, message", [
    ({"mode": "sort"}, "data.mode='sort' is not valid. Available: reverse, copy"),
    ({"min_length": 5, "max_length": 4}, "1 <= min_length <= max_length"),
    ({"alphabet": "aa"}, "distinct non-space characters"),
    ({"max_length": 2, "min_length": 1}, "ask for at most 351"),
])
def test_bad_settings_name_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        reverse.splits(1000, 10, 10, seed=0, **kwargs)


def test_data_reverse_composes_into_a_task_with_char_tokens():
    from zoo.data import load_task
    from zoo.data.task import encode

    cfg = compose(["data=reverse", "data.train_size=200", "data.val_size=20", "data.test_size=20",
                   "data.max_length=12"])
    task = load_task(cfg.data)
    assert task.name == "reverse" and task.metric == "exact_match"
    assert task.max_source_length == task.max_target_length == 13
    assert task.source_tokenizer.vocab_size == 4 + 26
    src, tgt = encode(task, "test")
    source, target = task.splits["test"][0][0], task.splits["test"][1][0]
    assert task.source_tokenizer.detokenize(src[:1].to_tensor()).numpy()[0].decode() == source
    assert task.target_tokenizer.detokenize(tgt[:1, 1:].to_tensor()).numpy()[0].decode() == source[::-1] == target


@pytest.mark.parametrize("model", ["seq2seq", "bahdanau", "luong", "transformer"])
def test_experiment_long_sources_puts_every_model_on_reverse_with_one_budget(model):
    from zoo.config import validate_train

    cfg = compose(["experiment=long_sources", f"model={model}"])
    validate_train(cfg)
    assert cfg.model.name == model and cfg.data.name == "reverse" and cfg.data.max_length == 50
    assert cfg.trainer.epochs == 6 and cfg.trainer.max_minutes == 15


def test_a_test_length_range_apart_from_training_draws_longer_unseen_strings():
    splits = reverse.splits(300, 30, 40, seed=5, min_length=1, max_length=6, test_min_length=7, test_max_length=12)
    assert {len(s) for s in splits["train"][0] + splits["val"][0]} <= set(range(1, 7))
    assert {len(s) for s in splits["test"][0]} <= set(range(7, 13)) and len(splits["test"][0]) == 40
    assert splits["test"][1] == [s[::-1] for s in splits["test"][0]]
    assert splits == reverse.splits(300, 30, 40, seed=5, min_length=1, max_length=6, test_min_length=7,
                                    test_max_length=12)


def test_an_overlapping_test_range_never_repeats_a_training_string():
    splits = reverse.splits(150, 10, 300, seed=2, min_length=1, max_length=4, test_min_length=4,
                            test_max_length=5, alphabet="abcd")
    test, seen = set(splits["test"][0]), set(splits["train"][0] + splits["val"][0])
    assert len(test) == 300 and not test & seen and {len(s) for s in test} == {4, 5}
    assert sum(len(s) == 4 for s in seen) > 50  # the ranges share length 4, where training strings are excluded


@pytest.mark.parametrize("data, message", [
    ({"test_min_length": 9, "test_max_length": 5}, "data.test_min_length=9 and data.test_max_length=5 give an "
                                                    "empty test length range 9-5"),
    ({"test_min_length": 60}, "data.max_length=50 fills in the null"),
    ({"test_max_length": 0}, "data.test_max_length=0 is not valid: expected an integer >= 1, or null"),
    ({"test_min_length": "x"}, "data.test_min_length='x' is not valid"),
])
def test_bad_test_lengths_are_one_line_from_the_validator_and_the_builder(data, message):
    from zoo.config import train_problems
    from zoo.data import load_task
    from zoo.errors import ConfigError

    cfg = compose(["data=reverse", *(f"data.{k}={v}" for k, v in data.items())])
    assert [line for line in train_problems(cfg) if message in line]
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_task(cfg.data)


def test_experiment_length_generalization_tests_past_the_trained_lengths_in_the_by_length_table():
    import numpy as np

    from zoo.config import validate_train
    from zoo.data import load_task
    from zoo.evaluation.by_length import by_length, token_lengths
    from zoo.export.translator import Translator
    from zoo.models import create

    cfg = compose(["experiment=length_generalization", "data.train_size=100", "data.val_size=10",
                   "data.test_size=24", "decoding.max_length=2"])
    validate_train(cfg)
    assert cfg.model.name == "transformer" and (cfg.data.max_length, cfg.data.test_min_length) == (40, 41)
    task = load_task(cfg.data)
    assert {len(s) for s in task.splits["train"][0]} <= set(range(1, 41))
    assert min(map(len, task.splits["test"][0])) >= 41 and max(map(len, task.splits["test"][0])) <= 160
    assert task.max_source_length == task.max_target_length == 161  # no test input is cut
    model = create("transformer", source_vocab_size=task.source_tokenizer.vocab_size,
                   target_vocab_size=task.target_tokenizer.vocab_size, embed_dim=8, intermediate_dim=8, num_layers=1,
                   num_heads=2)
    translator = Translator(model, task.source_tokenizer, task.target_tokenizer, task.max_source_length, 2)
    sources, references = task.splits["test"]
    outputs = translator.translate(np.array(sources))  # the translator of the run's scoring and export
    lengths = token_lengths(outputs["source_tokens"].numpy())
    assert lengths == [len(s) for s in sources]
    rows = by_length(lengths, [t.decode() for t in outputs["text"].numpy()], references)
    assert rows[0]["min_length"] >= 33 and rows[-1]["max_length"] >= max(lengths) > 40
    assert sum(row["count"] for row in rows) == len(sources)


def test_experiment_length_generalization_takes_every_position_scheme_of_the_transformer():
    from zoo import catalog
    from zoo.config import train_problems

    positions = next(r["values"] for r in catalog.model_constraints("transformer") if r["key"] == "positions")
    assert {"sinusoidal", "learned", "rotary", "relative", "t5", "alibi", "none"} <= set(positions)
    for scheme in positions:  # the sweep of the experiment's comment
        assert train_problems(compose(["experiment=length_generalization", f"model.positions={scheme}"])) == []
