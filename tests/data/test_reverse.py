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
