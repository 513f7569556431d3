"""data=story_qa: the builder over generated stories and users' bAbI files, the in-graph encoding,
batches, and the accuracy/evidence scoring (``zoo.evaluation.qa``, ``zoo.metrics.evidence``)."""

import numpy as np
import pytest

from zoo.data import babi
from zoo.errors import ConfigError, CorpusError
from zoo.metrics.evidence import evidence, evidence_by_hop, evidence_hits

tf = pytest.importorskip("tensorflow")

from zoo.data.story_qa import arrays, build_task, encode_text, make_dataset, story_text  # noqa: E402
from zoo.evaluation.qa import format_table, qa_metrics  # noqa: E402

# A self-written bAbI file: three stories, four questions (one story asks twice).
FIXTURE = """\
1 Mary moved to the bathroom.
2 John went to the hallway.
3 Where is Mary?\tbathroom\t1
4 Mary picked up the football.
5 Mary went to the garden.
6 Where is the football?\tgarden\t4 5
1 Sandra travelled to the office.
2 Is Sandra in the office?\tyes\t1
1 Daniel grabbed the milk.
2 Daniel got the apple.
3 How many objects is Daniel carrying?\ttwo\t1 2
"""


@pytest.fixture
def babi_file(tmp_path):
    path = tmp_path / "qa.txt"
    path.write_text(FIXTURE, encoding="utf-8")
    return path


def test_builder_reads_a_users_babi_file_and_splits_it(babi_file):
    task = build_task(seed=3, path=str(babi_file), val_size=1, test_size=1)
    assert sorted(len(task.examples[s]) for s in ("train", "val", "test")) == [1, 1, 2]
    every = [e for s in task.examples.values() for e in s]
    assert sorted(e.answer for e in every) == ["bathroom", "garden", "two", "yes"]
    football = next(e for e in every if e.question == "Where is the football?")
    # The story of a question is every statement of its story before it; ids become 0-based indices.
    assert football.story == ("Mary moved to the bathroom.", "John went to the hallway.",
                              "Mary picked up the football.", "Mary went to the garden.")
    assert football.supporting == (2, 3) and football.kind == "two_facts"
    assert task.fingerprint and len(task.fingerprint) == 64
    assert task.stats()["train_examples"] == 2 and task.metric == "accuracy"
    # The same seed splits the same way.
    again = build_task(seed=3, path=str(babi_file), val_size=1, test_size=1)
    assert again.examples == task.examples


def test_builder_with_a_separate_test_file(babi_file, tmp_path):
    test = tmp_path / "test.txt"
    test.write_text("1 John went to the kitchen.\n2 Where is John?\tkitchen\t1\n", encoding="utf-8")
    task = build_task(path=str(babi_file), test_path=str(test), val_size=1)
    assert [e.answer for e in task.examples["test"]] == ["kitchen"]
    assert len(task.examples["train"]) == 3


def test_builder_errors_name_the_value_and_the_fix(babi_file, tmp_path):
    with pytest.raises(ConfigError, match=r"data.path=.*nope.txt does not exist"):
        build_task(path=str(tmp_path / "nope.txt"))
    with pytest.raises(ConfigError, match="none left for training"):
        build_task(path=str(babi_file), val_size=2, test_size=2)
    with pytest.raises(ConfigError, match="data.kinds=.*expected a non-empty list of .single_fact"):
        build_task(kinds=["single_fact", "riddles"], train_size=4, val_size=1, test_size=1)
    with pytest.raises(ConfigError, match="at most 50"):
        build_task(max_sentences=51, train_size=4, val_size=1, test_size=1)
    with pytest.raises(ConfigError, match="data.test_path needs data.path"):
        build_task(test_path=str(babi_file), train_size=4, val_size=1, test_size=1)
    bad = tmp_path / "bad.txt"
    bad.write_text("1 Mary moved to the bathroom.\n2 Where is Mary?\tbathroom\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad.txt:2"):
        build_task(path=str(bad), val_size=0 + 1, test_size=1)


def test_generated_task_is_deterministic_and_its_splits_are_the_generator_s():
    a = build_task(seed=5, train_size=30, val_size=5, test_size=5, max_sentences=6)
    b = build_task(seed=5, train_size=30, val_size=5, test_size=5, max_sentences=6)
    assert a.examples == b.examples and a.tokenizer.vocabulary == b.tokenizer.vocabulary
    every = babi.generate(5, 40, max_sentences=6)
    assert a.examples["train"] + a.examples["val"] + a.examples["test"] == every
    assert set(a.kinds) == set(babi.KINDS)
    assert all(e.answer in a.tokenizer.vocabulary for e in every)


def test_memory_keeps_the_last_sentences_and_shifts_the_evidence(babi_file):
    task = build_task(path=str(babi_file), val_size=1, test_size=1, memory_size=2, seed=0)
    every = [e for s in task.examples.values() for e in s]
    assert all(len(e.story) <= 2 for e in every)
    football = next(e for e in every if e.question == "Where is the football?")
    assert football.story == ("Mary picked up the football.", "Mary went to the garden.")
    assert football.supporting == (0, 1)
    # "Where is Mary?" keeps its 2 statements; nothing had to be dropped from this file.
    assert task.info["dropped_out_of_memory"] == 0


def test_encoding_splits_sentences_by_line_or_by_full_stop():
    task = build_task(seed=0, train_size=40, val_size=2, test_size=2)
    story = ["Mary moved to the bathroom.", "John went to the hallway."]
    args = (task.tokenizer, task.memory_size, task.max_words, task.max_question_words)
    by_line = encode_text(task.tokenizer, tf.constant([story_text(story)]), tf.constant(["Where is Mary?"]), *args[1:])
    by_stop = encode_text(task.tokenizer, tf.constant([" ".join(story)]), tf.constant(["Where is Mary?"]), *args[1:])
    np.testing.assert_array_equal(by_line[0].numpy(), by_stop[0].numpy())
    ids = by_line[0].numpy()[0]
    assert ids.shape[0] == 2 and ids[0, 0] == task.tokenizer.vocabulary.index("mary")
    assert [s.decode() for s in by_line[2].to_list()[0]] == story
    # An empty story still gives one (all padding) sentence; an unknown word is <unk> (1).
    empty = encode_text(task.tokenizer, tf.constant(["", "Zorro flew."]), tf.constant(["", "Where?"]), *args[1:])
    assert empty[0].shape[0] == 2 and np.all(empty[0].numpy()[0] == 0)
    assert empty[0].numpy()[1, 0, 0] == 1


def test_arrays_and_batches(babi_file):
    task = build_task(path=str(babi_file), val_size=1, test_size=1, seed=1, min_freq=1)  # every word kept
    data = arrays(task, "train")
    n = len(task.examples["train"])
    assert data["story"].shape[0] == n and data["story"].dtype == np.int32
    for i, e in enumerate(task.examples["train"]):
        assert data["sentences"][i] == len(e.story)
        assert sorted(np.flatnonzero(data["supporting"][i]).tolist()) == sorted(e.supporting)
        assert task.tokenizer.vocabulary[data["answer"][i]] == e.answer
        assert task.kinds[data["kind"][i]] == e.kind
    bucketed = list(make_dataset(task, "train", 8, shuffle=True, encoded=data))  # by sentence count
    assert sum(int(y.shape[0]) for _, y in bucketed) == n
    (story, question), answer = next(iter(make_dataset(task, "train", 8, shuffle=True, encoded=data,
                                                       bucket_boundaries=[])))
    assert story.shape[0] == n and answer.shape == (n, 1) and question.shape[0] == n
    assert story.shape[1] == max(len(e.story) for e in task.examples["train"])  # padded to the batch's longest


def test_evidence_against_hand_computed_cases():
    attention = [np.array([[0.1, 0.7, 0.2], [0.6, 0.3, 0.1]]),  # hop 1 -> 1 (gold), hop 2 -> 0 (not)
                 np.array([[0.5, 0.5], [0.2, 0.8]])]  # tie -> 0 (gold), hop 2 -> 1 (not)
    supporting = [(1, 2), (0,)]
    np.testing.assert_array_equal(evidence_hits(attention, supporting), [[True, False], [True, False]])
    assert evidence(attention, supporting) == 0.5
    assert evidence_by_hop(attention, supporting) == [1.0, 0.0]
    import zoo.metrics

    assert zoo.metrics.get("evidence").score(["a"], ["a"]) is None  # no attention: not a QA split
    assert zoo.metrics.get("evidence").score(["a", "b"], ["a", "b"], sentence_attention=attention,
                                             supporting=supporting) == 0.5


def test_qa_metrics_per_kind():
    examples = [babi.Example(("a.", "b."), "q?", "garden", (1,), "single_fact"),
                babi.Example(("a.", "b."), "q?", "yes", (0,), "yes_no"),
                babi.Example(("a.", "b."), "q?", "no", (0, 1), "yes_no")]
    attention = [np.array([[0.2, 0.8]]), np.array([[0.9, 0.1]]), np.array([[0.1, 0.9]])]
    metrics = qa_metrics(["garden", "no", "no"], attention, examples)
    assert metrics["accuracy"] == pytest.approx(2 / 3) and metrics["evidence"] == 1.0
    assert metrics["accuracy_single_fact"] == 1.0 and metrics["accuracy_yes_no"] == 0.5
    assert metrics["evidence_hop1"] == 1.0 and "accuracy_counting" not in metrics
    table = format_table({f"test_{k}": v for k, v in metrics.items()}, ["single_fact", "yes_no", "counting"])
    assert table.splitlines()[1].split() == ["single_fact", "1.000", "1.000"]
    assert table.splitlines()[-1].split() == ["all", "0.667", "1.000"]


def test_qa_models_and_data_are_listed_by_task_and_mismatches_are_named():
    import zoo.models
    from zoo import catalog
    from zoo.config import precheck

    assert catalog.data_task("story_qa") == "qa" and catalog.data_task("dates") == "seq2seq"
    assert catalog.models("qa") == zoo.models.names(task="qa") == [
        "aoa_reader", "coattention_reader", "memory_network", "relation_reader", "self_attentive_reader"]
    assert precheck(["model=memory_network"]) == (
        "model=memory_network is a qa model and data=dates a seq2seq task. "
        "Models for data=dates: bahdanau, luong, seq2seq, transformer")
    assert precheck(["model=bahdanau", "data=story_qa"]).startswith(
        "model=bahdanau is a seq2seq model and data=story_qa a qa task. Models for data=story_qa: aoa_reader")
    assert precheck(["model=memory_network", "data=story_qa", "model.encoding=location_2"]) is None
