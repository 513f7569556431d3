"""Stages ``score`` and ``export``: the validation metric each epoch, examples, and the files of
the export (never from non-finite weights)."""

import numpy as np
import pytest

from conftest import ROOT, compose


@pytest.fixture(scope="module")
def trained():
    from zoo.training.data import load_data
    from zoo.training.export import make_translator
    from zoo.training.model import build
    from zoo.training.runtime import setup

    cfg = compose(["debug=smoke"])
    runtime = setup(cfg.trainer, 0)
    task = load_data(cfg).task
    model, _ = build(cfg, task, runtime)
    return cfg, task, model, make_translator(model, task, cfg)


def test_the_validation_metric_is_the_tasks_own(trained):
    from zoo.training import score

    cfg, task, model, translator = trained
    value = score.validation_metric(translator.translate, task)()
    assert list(value) == ["exact_match"] and 0.0 <= value["exact_match"] <= 1.0


def test_examples_are_translated_and_written(trained, tmp_path, capsys):
    from zoo.training import score

    cfg, task, model, translator = trained
    assert score.examples(translator.translate, [], 2, str(tmp_path)) == (None, {})
    path, metrics = score.examples(translator.translate, [("9 may 2018", "2018-05-09")], 2, str(tmp_path))
    assert path.endswith("examples.csv") and set(metrics) == {"example_bleu_0", "example_bleu_mean"}
    assert "9 may 2018 =>" in capsys.readouterr().out


def test_export_writes_the_saved_model_and_vocabularies_and_refuses_nan(trained, tmp_path):
    from zoo.training.export import export

    cfg, task, model, translator = trained
    paths = export(translator, model, task, "seed: 0\n", str(tmp_path / "ok"))
    assert (tmp_path / "ok" / "saved_model" / "saved_model.pb").exists()
    assert (tmp_path / "ok" / "saved_model" / "assets.extra" / "model.keras").exists()
    assert sorted(p.name for p in (tmp_path / "ok" / "vocab").iterdir()) == ["source", "target"]
    assert set(paths) == {"saved_model", "vocab"}
    weights = model.get_weights()
    model.set_weights([np.full_like(w, np.nan) for w in weights])
    try:
        with pytest.raises(ValueError, match="NaN or infinite"):
            export(translator, model, task, "", str(tmp_path / "nan"))
    finally:
        model.set_weights(weights)
    assert not (tmp_path / "nan" / "saved_model").exists()


def test_the_served_model_requires_the_pinned_versions():
    from zoo.export.pyfunc import pyfunc_requirements

    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        name, sep, pinned = line.partition("==")
        if sep:
            pins[name.strip()] = pinned.strip()
    for requirement in pyfunc_requirements():
        name, _, installed = requirement.partition("==")
        assert pins[name] == installed, f"{name}: installed {installed}, requirements.txt pins {pins[name]}"


def test_decoding_that_the_vocabulary_cannot_serve_is_refused(trained):
    from zoo.errors import ConfigError
    from zoo.export.translator import Translator

    cfg, task, model, translator = trained
    size = task.target_tokenizer.vocab_size
    with pytest.raises(ConfigError, match=rf"decoding.beam_size={size * 2} is larger than the target vocabulary"):
        Translator(model, task.source_tokenizer, task.target_tokenizer, 8, 8, decoding={"beam_size": size * 2})
    with pytest.raises(ConfigError, match=rf"decoding.top_k={size + 1} is larger"):
        Translator(model, task.source_tokenizer, task.target_tokenizer, 8, 8,
                   decoding={"strategy": "sample", "top_k": size + 1})
    Translator(model, task.source_tokenizer, task.target_tokenizer, 8, 8, decoding={"beam_size": size - 3})
