import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from zoo.data import load_task, make_dataset  # noqa: E402
from zoo.data.tokenizers import EOS_ID, SPECIALS, UNK_ID, build_vocabulary, fit_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer():
    return fit_tokenizer("char", ["saturday, 9 may 2018", "2018-05-09", "tue 2 jan 1979"], min_freq=1)


def test_vocabulary_starts_with_the_reserved_tokens_and_respects_limits():
    vocab = build_vocabulary([list("aab"), list("abc")], min_freq=2)
    assert vocab == list(SPECIALS) + ["a", "b"]
    assert build_vocabulary([list("aab")], max_size=5) == list(SPECIALS) + ["a"]


def test_normalization_folds_case_unicode_and_whitespace(tokenizer):
    out = tokenizer.normalize(tf.constant(["  SATURDAY,\t 9  MAY 2018 ", "ﬁ\u200bne", "Straße"])).numpy()
    assert [s.decode() for s in out] == ["saturday, 9 may 2018", "fine", "strasse"]


def test_invalid_utf8_and_unknown_characters_map_to_unk(tokenizer):
    ids = tokenizer.tokenize(tf.constant([b"9\xff\xfe", "ß€".encode()])).to_list()
    assert ids[0][0] == tokenizer.vocabulary.index("9")
    assert ids[0][1:] == [UNK_ID, UNK_ID]
    assert all(i == UNK_ID for i in ids[1][2:])


def test_detokenize_inverts_tokenize_up_to_eos(tokenizer):
    text = ["2018-05-09", "9 may", ""]
    ids = tokenizer.tokenize(tf.constant(text)).to_tensor()
    ids = tf.concat([ids, tf.fill([3, 1], tf.constant(EOS_ID, tf.int64)), tf.fill([3, 2], tf.constant(5, tf.int64))], 1)
    assert [s.decode() for s in tokenizer.detokenize(ids).numpy()] == text


def test_python_split_equals_graph_split(tokenizer):
    text = ["Tue 2 Jan 1979", "09.05.2018"]
    assert tokenizer.python_split(text) == [list("tue 2 jan 1979"), list("09.05.2018")]


def test_dataset_batches_are_the_tokenized_splits():
    task = load_task({"name": "dates", "train_size": 40, "val_size": 8, "test_size": 8, "seed": 0})
    ds = make_dataset(task, "val", batch_size=8)
    (source, target_in), target_out = next(iter(ds))
    assert source.shape[0] == 8 and target_in.shape == target_out.shape
    # Teacher forcing: target_out is target_in shifted by one.
    np.testing.assert_array_equal(target_in.numpy()[:, 1:], target_out.numpy()[:, :-1])
    first = task.source_tokenizer.tokenize(tf.constant(task.splits["val"][0][:1])).to_list()[0]
    assert source.numpy()[0, : len(first)].tolist() == first
    assert source.numpy()[0, len(first)] == EOS_ID
    texts = task.target_tokenizer.detokenize(target_out).numpy()
    assert [t.decode() for t in texts] == task.splits["val"][1]
