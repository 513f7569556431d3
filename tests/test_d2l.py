"""experiment=d2l_bahdanau|d2l_transformer: d2l's sentence BLEU, the examples config, the experiments."""

import csv
import math

import pytest

from zoo.config import ConfigError, precheck, validate_train
from zoo.evaluation.examples import format_examples, parse_examples, write_examples
from zoo.metrics.d2l_bleu import d2l_bleu, d2l_tokens

from conftest import compose

D2L_EXAMPLES = [("go .", "va !"), ("i lost .", "j'ai perdu ."), ("he's calm .", "il est calme ."),
                ("i'm home .", "je suis chez moi .")]


@pytest.mark.parametrize("hypothesis, reference, k, expected", [
    # d2l's printed 0.658: BP 1, p1 = 3/4, p2 = 1/3 ("il est" only)
    ("il est riche .", "il est calme .", 2, math.sqrt(3 / 4) * (1 / 3) ** 0.25),
    ("je suis chez moi .", "je suis chez moi .", 2, 1.0),
    ("va!", "Va\u202f!", 2, 1.0),  # our canonical text vs d2l's reference: the same tokens
    ("je suis", "je suis chez moi .", 2, math.exp(1 - 5 / 2)),  # brevity penalty only
    ("va", "va !", 2, math.exp(1 - 2 / 1)),  # no bigram in a 1-word hypothesis: n stops at 1
    ("le le le", "le chat", 1, math.sqrt(1 / 3)),  # clipped: "le" counts once
    # longer than the reference: no penalty; p1 = 5/6 (one "moi" too many), p2 = 4/5
    ("je suis chez moi moi .", "je suis chez moi .", 2, (5 / 6) ** 0.5 * (4 / 5) ** 0.25),
    ("il est riche .", "il est calme .", 3, 0.0),  # p3 = 0/2: no trigram matches
    ("", "va !", 2, 0.0),
])
def test_d2l_bleu_matches_hand_computed_values(hypothesis, reference, k, expected):
    assert d2l_bleu(hypothesis, reference, k) == pytest.approx(expected, abs=1e-12)


def test_d2l_bleu_rounds_to_d2l_printout_and_checks_k():
    assert f"{d2l_bleu('il est riche .', 'il est calme .', k=2):.3f}" == "0.658"
    assert d2l_tokens("J'ai perdu.") == ["j'ai", "perdu", "."]
    with pytest.raises(ValueError, match="Received: k=0"):
        d2l_bleu("va !", "va !", k=0)


def test_examples_are_parsed_checked_written_and_printed(tmp_path):
    cfg = compose(["experiment=d2l_bahdanau"])
    assert parse_examples(cfg.examples, cfg.examples_bleu_k) == D2L_EXAMPLES
    assert parse_examples([], 2) == [] and parse_examples(None, 2) == []
    with pytest.raises(ConfigError, match=r"examples\[1\]=.* expected a mapping \{source: <text>, reference: <text>\}"):
        parse_examples([{"source": "go .", "reference": "va !"}, {"source": "i lost ."}], 2)
    with pytest.raises(ConfigError, match="examples_bleu_k=0 is not valid"):
        parse_examples([], 0)
    rows = [{"source": "he's calm .", "reference": "il est calme .", "hypothesis": "il est riche.",
             "bleu": d2l_bleu("il est riche.", "il est calme .")}]
    assert format_examples(rows) == "he's calm . => il est riche., bleu 0.658"
    write_examples(tmp_path / "examples.csv", rows)
    assert list(csv.DictReader(open(tmp_path / "examples.csv", encoding="utf-8"))) == [
        {"source": "he's calm .", "reference": "il est calme .", "hypothesis": "il est riche.", "bleu": "0.6580"}]


@pytest.mark.parametrize("name, model, epochs", [("d2l_bahdanau", "bahdanau", 250), ("d2l_transformer", "transformer", 200)])
def test_the_d2l_experiments_compose_with_d2l_settings(name, model, epochs, tmp_path, monkeypatch):
    # The config check looks for the pair's file in $ZOO_DATA_DIR and reads its first lines: a real
    # (tiny) pair file in manythings.org's format.
    import zipfile

    with zipfile.ZipFile(tmp_path / "fra-eng.zip", "w") as archive:
        archive.writestr("fra.txt", "Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM) & #1158250 (Wittydev)\n"
                                    "Hi.\tSalut !\tCC-BY 2.0 (France) Attribution: tatoeba.org #538123 (CM) & #509819 (Aiji)\n")
    monkeypatch.setenv("ZOO_DATA_DIR", str(tmp_path))
    cfg = compose([f"experiment={name}"])
    validate_train(cfg)
    assert cfg.model.name == model and cfg.data.name == "tatoeba" and cfg.data.pair == "fra-eng"
    assert cfg.data.max_examples == 600 and cfg.data.min_freq == 2 and cfg.data.tokenizer == "word"
    assert cfg.data.val_size == 0 and cfg.data.test_size == 0  # trained on all 600 pairs, like d2l
    assert cfg.model.embed_dim == 32 and cfg.model.num_layers == 2 and cfg.model.dropout == 0.1
    assert cfg.model["hidden_size" if model == "bahdanau" else "intermediate_dim"] == (32 if model == "bahdanau" else 64)
    assert cfg.optimizer.learning_rate == 0.005 and cfg.trainer.clipnorm == 1.0 and cfg.trainer.batch_size == 64
    assert cfg.trainer.epochs == epochs and cfg.trainer.early_stopping_patience == 0
    assert [(e.source, e.reference) for e in cfg.examples] == D2L_EXAMPLES and cfg.examples_bleu_k == 2
    assert precheck([f"experiment={name}", "data.val_size=0.1", "data.test_size=50"]) is None
    assert precheck(["data=tatoeba", "data.val_size=0", "data.test_size=0"]) is None
