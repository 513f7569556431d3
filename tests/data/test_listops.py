"""data=listops (zoo.data.listops): ListOps by LRA's rules, its values checked by hand, LRA's TSV files
read, and bad files refused in one line naming the file and the line, before TensorFlow starts."""

import random

import pytest

from zoo.data import listops
from zoo.errors import CorpusError

from conftest import compose


@pytest.mark.parametrize("expression, value", [
    ("7", 7),
    ("[MAX 4 3 [MIN 2 3 ] 1 0 ]", 4),                 # max(4, 3, min(2, 3) = 2, 1, 0)
    ("[MIN [MAX 0 9 ] [SM 5 5 ] 3 ]", 0),             # min(9, 10 mod 10 = 0, 3)
    ("[MED 9 1 5 ]", 5),                              # 1 5 9: the middle one
    ("[SM 7 [MED 1 8 5 2 ] 9 ]", 9),                  # median(1 2 5 8) = 3.5 -> 3; 7 + 3 + 9 = 19 -> 9
    ("[SM 9 9 9 9 ]", 6),                             # 36 mod 10
    ("[MED 0 9 ]", 4),                                # int(4.5), as LRA's int(np.median(...))
    ("( ( ( [MAX 2 ) 9 ) ] )", 9),                    # LRA's file form, the parentheses skipped
])
def test_the_evaluator_gives_the_values_computed_by_hand(expression, value):
    assert listops.evaluate(expression) == value


@pytest.mark.parametrize("expression", ["[MAX 1 2", "[MAX ]", "1 2", "[MAX 1 ] 3", "[AVG 1 2 ]", "]"])
def test_the_evaluator_refuses_what_is_not_one_tree(expression):
    with pytest.raises(ValueError):
        listops.evaluate(expression)


def nesting(expression):
    depth = deepest = 0
    for token in expression.split():
        depth += token.startswith("[") - (token == "]")
        deepest = max(deepest, depth)
    return deepest


def test_generated_examples_follow_lras_rules_and_their_targets_are_the_evaluators_values():
    rows = listops.generate(200, seed=3, min_length=5, max_length=60, max_depth=4, max_args=5)
    assert rows == listops.generate(200, seed=3, min_length=5, max_length=60, max_depth=4, max_args=5)
    assert len({e for e, _ in rows}) == 200
    for expression, value in rows:
        assert value == listops.evaluate(expression)
        assert 5 <= len(expression.split()) <= 60
        assert nesting(expression) <= 3  # operators below max_depth only: depths 1-3
        counts = []  # arguments per operator: 2 to max_args
        for token in expression.split():
            if token.startswith("["):
                counts.append(0)
            elif token == "]":
                assert 2 <= counts.pop() <= 5
                if counts:
                    counts[-1] += 1
            elif counts:
                counts[-1] += 1
    operators = {t for e, _ in rows for t in e.split() if t.startswith("[")}
    assert operators == {"[MAX", "[MIN", "[MED", "[SM"}


def test_a_tree_and_its_string_have_one_value_and_lras_length():
    rng = random.Random(0)
    for _ in range(300):
        tree, length = listops.generate_tree(rng, max_depth=5, max_args=4)
        text = listops.to_string(tree)
        assert listops.tree_value(tree) == listops.evaluate(text) and length == len(text.split())


def test_lengths_the_rules_cannot_reach_are_refused():
    from zoo.errors import ConfigError

    with pytest.raises(ConfigError, match="data.min_length=20 is longer than any ListOps tree of depth <= 2"):
        listops.generate(5, seed=0, min_length=20, max_length=40, max_depth=2, max_args=3)


def test_data_listops_is_a_classification_task_over_lras_tokens():
    import tensorflow as tf

    from zoo.data import load_task
    from zoo.data.classification import encode_texts, majority_accuracy, make_dataset

    cfg = compose(["data=listops", "data.train_size=40", "data.val_size=5", "data.test_size=6",
                   "data.min_length=10", "data.max_length=40"])
    task = load_task(cfg.data)
    assert task.num_classes == 10 and task.vocab_size == 4 + 15 and task.metric == "accuracy"
    assert [len(task.splits[s][0]) for s in ("train", "val", "test")] == [40, 5, 6]
    assert task.splits["test"][1] == [listops.evaluate(e) for e in task.splits["test"][0]]
    same = encode_texts(task, tf.constant(["( ( ( [MAX 2 ) 9 ) ] )", "[MAX 2 9 ]"])).numpy()
    assert (same[0] == same[1]).all() and 3 not in same[0] and 1 not in same[0]  # no <eos>, no <unk>
    assert task.tokenizer.python_split(["[MAX 4 [SM 1 ] ]"]) == [["[MAX", "4", "[SM", "1", "]", "]"]]
    (ids, labels), = make_dataset(task, "val", batch_size=5).take(1)
    assert ids.shape[0] == 5 and (labels.numpy()[:, 0] == [y + 1 for y in task.splits["val"][1]]).all()
    train = task.splits["train"][1]
    majority = max(range(10), key=lambda c: (train.count(c), -c))
    assert majority_accuracy(task) == sum(y == majority for y in task.splits["test"][1]) / 6


HEADER = "Source\tTarget\n"


def lra_lines(n, seed=0):
    """LRA's own file form: each sub-list in parentheses (its to_string)."""
    rows = listops.generate(n, seed=seed, min_length=3, max_length=30, max_depth=3, max_args=3)
    return [(" ".join(f"( {t}" if t.startswith("[") else (f"{t} )" if t == "]" else t)
                      for t in e.split()), v) for e, v in rows]


def write_tsv(path, rows, header=HEADER):
    path.write_text(header + "".join(f"{s}\t{v}\n" for s, v in rows), encoding="utf-8")
    return path


def test_lras_folder_and_a_single_file_are_read_with_data_path(tmp_path):
    from zoo.config import train_problems
    from zoo.data import load_task

    folder = tmp_path / "listops-1000"
    folder.mkdir()
    for name, n, seed in [("basic_train.tsv", 30, 1), ("basic_val.tsv", 4, 2), ("basic_test.tsv", 5, 3)]:
        write_tsv(folder / name, lra_lines(n, seed))
    cfg = compose(["data=listops", f"data.path={folder}"])
    assert not [p for p in train_problems(cfg) if "data." in p]
    task = load_task(cfg.data)
    assert [len(task.splits[s][0]) for s in ("train", "val", "test")] == [30, 4, 5]
    assert all("(" not in e for e in task.splits["train"][0]) and task.fingerprint
    assert task.splits["val"][1] == [listops.evaluate(e) for e in task.splits["val"][0]]

    single = write_tsv(tmp_path / "listops.tsv", lra_lines(40, 4))
    task = load_task(compose(["data=listops", f"data.path={single}", "data.val_size=5", "data.test_size=7"]).data)
    assert [len(task.splits[s][0]) for s in ("train", "val", "test")] == [28, 5, 7]
    assert sorted(sum((task.splits[s][0] for s in task.splits), [])) == \
        sorted(" ".join(t for t in s.split() if t not in "()") for s, _ in lra_lines(40, 4))


BAD = [  # (id, file text, what the one line must say)
    ("missing header", "".join(f"{s}\t{v}\n" for s, v in [("[MAX 1 2 ]", 2)]),
     ["line 1", "expected LRA's header 'Source<TAB>Target'"]),
    ("no tab", HEADER + "[MAX 1 2 ]\t2\n[MIN 1 2 ] 1\n", ["line 3", "no TAB"]),
    ("target not a digit", HEADER + "[MAX 1 2 ]\t12\n", ["line 2", "the target '12' is not a digit 0-9"]),
    ("unknown token", HEADER + "[AVG 1 2 ]\t1\n", ["line 2", "'[AVG' is not a ListOps token"]),
    ("header only", HEADER, ["line 2", "no 'expression<TAB>value' line"]),
]


@pytest.mark.parametrize("text, expected", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_files_are_one_line_naming_the_file_and_line_from_the_builder_and_the_validator(tmp_path, text,
                                                                                            expected):
    from zoo.config import train_problems
    from zoo.data import load_task

    path = tmp_path / "bad.tsv"
    path.write_text(text, encoding="utf-8")
    cfg = compose(["data=listops", f"data.path={path}", "data.val_size=1", "data.test_size=1"])
    with pytest.raises(CorpusError) as error:
        load_task(cfg.data)
    message = str(error.value)
    assert "\n" not in message and str(path) in message and all(e in message for e in expected), message
    assert [p for p in train_problems(cfg) if p == f"data.path={path}: {message}"]


def test_a_folder_without_lras_files_is_refused_naming_the_missing_ones(tmp_path):
    from zoo.config import train_problems

    write_tsv(tmp_path / "basic_train.tsv", lra_lines(5))
    problems = train_problems(compose(["data=listops", f"data.path={tmp_path}"]))
    assert [p for p in problems if "without LRA's basic_val.tsv, basic_test.tsv" in p]
