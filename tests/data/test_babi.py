"""zoo.data.babi: the story generator against an independent solver, and the bAbI text format."""

import collections
import re
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.data import babi
from zoo.errors import ConfigError, CorpusError, CorpusNotFoundError

# --- an independent solver: reads the story text alone, keeps the world, answers -----------------

MOVE = re.compile(r"(\w+) (?:moved|went|journeyed|travelled) to the (\w+)\.")
PICK = re.compile(r"(\w+) (?:picked up|got|grabbed) the (\w+)\.")
DROP = re.compile(r"(\w+) (?:dropped|put down|discarded) the (\w+)\.")
GIVE = re.compile(r"(\w+) (?:handed|gave) the (\w+) to (\w+)\.")
NUMBERS = ["none", "one", "two", "three", "four", "five", "six"]


def solve(story, question):
    """``(answer, evidence)`` from the text alone; an AssertionError when the story is
    inconsistent (someone acts with what they cannot have) or the question is not determined."""
    at = {}          # person -> (place, index of the move that put them there)
    holds = {}       # object -> (person, index of the sentence they got it by)
    lies = {}        # object -> (place, index of the drop, index of the dropper's move)
    changes = collections.defaultdict(list)  # person -> sentences that changed what they carry
    for i, sentence in enumerate(story):
        if m := MOVE.fullmatch(sentence):
            at[m[1]] = (m[2], i)
        elif m := PICK.fullmatch(sentence):
            person, obj = m[1], m[2]
            assert person in at, f"{sentence!r}: {person} acts before anyone knows where they are"
            assert obj not in holds, f"{sentence!r}: {holds.get(obj)} already holds the {obj}"
            assert obj not in lies or lies[obj][0] == at[person][0], f"{sentence!r}: the {obj} lies elsewhere"
            holds[obj] = (person, i)
            lies.pop(obj, None)
            changes[person].append(i)
        elif m := DROP.fullmatch(sentence):
            person, obj = m[1], m[2]
            assert holds.get(obj, (None,))[0] == person, f"{sentence!r}: {person} does not hold the {obj}"
            del holds[obj]
            lies[obj] = (at[person][0], i, at[person][1])
            changes[person].append(i)
        elif m := GIVE.fullmatch(sentence):
            giver, obj, taker = m[1], m[2], m[3]
            assert holds.get(obj, (None,))[0] == giver, f"{sentence!r}: {giver} does not hold the {obj}"
            assert taker in at and at[taker][0] == at[giver][0], f"{sentence!r}: {taker} is not beside {giver}"
            assert taker != giver
            holds[obj] = (taker, i)
            changes[giver].append(i)
            changes[taker].append(i)
        else:
            raise AssertionError(f"the solver cannot read {sentence!r}")

    if m := re.fullmatch(r"Where is the (\w+)\?", question):
        obj = m[1]
        if obj in holds:
            person, got = holds[obj]
            return at[person][0], {got, at[person][1]}
        assert obj in lies, f"nothing in the story says where the {obj} is"
        place, dropped, moved = lies[obj]
        return place, {dropped, moved}
    if m := re.fullmatch(r"Where is (\w+)\?", question):
        assert m[1] in at, f"nothing in the story says where {m[1]} is"
        return at[m[1]][0], {at[m[1]][1]}
    if m := re.fullmatch(r"Is (\w+) in the (\w+)\?", question):
        assert m[1] in at, f"nothing in the story says where {m[1]} is"
        return ("yes" if at[m[1]][0] == m[2] else "no"), {at[m[1]][1]}
    if m := re.fullmatch(r"How many objects is (\w+) carrying\?", question):
        assert changes[m[1]], f"the story never says {m[1]} holds anything"
        return NUMBERS[sum(p == m[1] for p, _ in holds.values())], set(changes[m[1]])
    if m := re.fullmatch(r"Are (\w+) and (\w+) in the same place\?", question):
        assert m[1] in at and m[2] in at and m[1] != m[2]
        return ("yes" if at[m[1]][0] == at[m[2]][0] else "no"), {at[m[1]][1], at[m[2]][1]}
    raise AssertionError(f"the solver cannot read the question {question!r}")


# --- the generator ------------------------------------------------------------------------------

def test_generation_is_deterministic_for_a_seed():
    assert babi.generate(7, 200) == babi.generate(7, 200)
    assert babi.generate(7, 200) != babi.generate(8, 200)
    assert babi.generate(7, 50, max_sentences=30) == babi.generate(7, 50, max_sentences=30)


@pytest.mark.parametrize("max_sentences", [4, 12, 50])
def test_every_question_is_answered_by_an_independent_solver(max_sentences):
    examples = babi.generate(3, 300, max_sentences=max_sentences)
    for ex in examples:
        answer, evidence = solve(ex.story, ex.question)
        assert answer == ex.answer, ex
        assert set(ex.supporting) == evidence, ex
        assert ex.kind == babi.infer_kind(ex.question, ex.answer, ex.supporting)


def test_examples_are_well_formed_and_unambiguous():
    examples = babi.generate(11, 500, max_sentences=20)
    counts = collections.Counter(ex.kind for ex in examples)
    assert counts == {kind: 100 for kind in babi.KINDS}  # cycled: even
    for ex in examples:
        assert ex.supporting and len(set(ex.supporting)) == len(ex.supporting)
        assert all(0 <= i < len(ex.story) for i in ex.supporting)
        assert ex.answer == ex.answer.lower() and " " not in ex.answer
        if ex.kind in ("single_fact", "two_facts"):
            assert ex.answer in babi.PLACES
            assert any(ex.answer in ex.story[i] for i in ex.supporting)  # the evidence names the answer
        elif ex.kind in ("yes_no", "relation"):
            assert ex.answer in ("yes", "no")
        else:
            assert ex.answer in babi.COUNT_WORDS
        assert len(ex.supporting) == {"single_fact": 1, "yes_no": 1, "two_facts": 2, "relation": 2}.get(
            ex.kind, len(ex.supporting))
    # one (story, question) has one answer
    seen = {}
    for ex in examples:
        assert seen.setdefault((ex.story, ex.question), ex.answer) == ex.answer
    # yes/no answers are not a constant
    for kind in ("yes_no", "relation"):
        yes = sum(ex.answer == "yes" for ex in examples if ex.kind == kind)
        assert 30 <= yes <= 70, (kind, yes)


def test_story_lengths_are_honoured():
    examples = babi.generate(5, 200, min_sentences=5, max_sentences=9)
    lengths = collections.Counter(len(ex.story) for ex in examples)
    assert set(lengths) == set(range(5, 10))
    assert {len(ex.story) for ex in babi.generate(5, 20, min_sentences=50, max_sentences=50)} == {50}
    assert {len(ex.story) for ex in babi.generate(5, 30, min_sentences=2, max_sentences=2)} == {2}


def test_kinds_can_be_chosen():
    examples = babi.generate(1, 20, kinds=["counting"])
    assert {ex.kind for ex in examples} == {"counting"}
    assert all(ex.question.startswith("How many") for ex in examples)


@pytest.mark.parametrize("kwargs, match", [
    (dict(max_sentences=51), "max_sentences <= 50.*max_sentences=51"),
    (dict(min_sentences=1), "2 <= min_sentences.*min_sentences=1"),
    (dict(min_sentences=8, max_sentences=4), "min_sentences=8, max_sentences=4"),
    (dict(kinds=["where"]), "kinds=\\['where'\\]"),
    (dict(kinds=[]), "non-empty"),
])
def test_bad_generator_arguments_are_refused(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        babi.generate(0, 5, **kwargs)


# --- the bAbI format ----------------------------------------------------------------------------

def test_write_then_read_gives_the_examples_back(tmp_path):
    examples = babi.generate(2, 100, max_sentences=15)
    path = tmp_path / "sub" / "stories.txt"
    babi.write(str(path), examples)
    assert babi.read(str(path)) == examples
    first = path.read_text(encoding="utf-8").splitlines()[: len(examples[0].story) + 1]
    assert first[0] == f"1 {examples[0].story[0]}"
    ids = " ".join(str(i + 1) for i in examples[0].supporting)
    assert first[-1] == f"{len(examples[0].story) + 1} {examples[0].question}\t{examples[0].answer}\t{ids}"


def test_a_babi_file_with_shared_stories(tmp_path):
    # As the bAbI distribution writes it: several questions per story, a space before the tab,
    # several supporting ids, a new story at id 1.
    text = ("1 Mary moved to the bathroom.\n"
            "2 John went to the hallway.\n"
            "3 Where is Mary? \tbathroom\t1\n"
            "4 Daniel went back to the hallway.\n"
            "5 Sandra moved to the garden.\n"
            "6 Where is Daniel? \thallway\t4\n"
            "7 John got the football there.\n"
            "8 Where is the football? \tHallway\t7 2\n"
            "\n"
            "1 Sandra travelled to the office.\n"
            "2 Is Sandra in the office? \tyes\t1\n")
    path = tmp_path / "qa.txt"
    path.write_text(text, encoding="utf-8")
    examples = babi.read(str(path))
    assert [ex.question for ex in examples] == ["Where is Mary?", "Where is Daniel?", "Where is the football?",
                                               "Is Sandra in the office?"]
    assert examples[0].story == ("Mary moved to the bathroom.", "John went to the hallway.")
    assert examples[1].story[-1] == "Sandra moved to the garden." and len(examples[1].story) == 4
    assert examples[1].supporting == (2,)
    assert examples[2].supporting == (4, 1) and examples[2].answer == "hallway"
    assert examples[3].story == ("Sandra travelled to the office.",) and examples[3].supporting == (0,)
    assert [ex.kind for ex in examples] == ["single_fact", "single_fact", "two_facts", "yes_no"]


def test_windows_line_ends_and_a_byte_order_mark_are_read(tmp_path):
    path = tmp_path / "windows.txt"
    path.write_bytes("\ufeff1 Mary moved to the bathroom.\r\n2 Where is Mary?\tbathroom\t1\r\n".encode("utf-8"))
    assert babi.read(str(path)) == [babi.Example(("Mary moved to the bathroom.",), "Where is Mary?", "bathroom", (0,),
                                                 "single_fact")]


def test_a_directory_is_read_file_by_file_in_sorted_order(tmp_path):
    a, b = babi.generate(0, 3), babi.generate(1, 2)
    babi.write(str(tmp_path / "b.txt"), b)
    babi.write(str(tmp_path / "a.txt"), a)
    (tmp_path / "notes.md").write_text("not a bAbI file", encoding="utf-8")
    assert babi.read(str(tmp_path)) == a + b


def test_the_kind_of_other_questions_is_inferred():
    assert babi.infer_kind("What is Mary carrying?", "football", [3]) == "single_fact"
    assert babi.infer_kind("Where was the apple before the kitchen?", "garden", [1, 4, 6]) == "two_facts"
    assert babi.infer_kind("Is the box bigger than the chest?", "yes", [2]) == "yes_no"
    assert babi.infer_kind("how many  objects is John carrying?", "two", [2, 5]) == "counting"


MARY = "1 Mary moved to the bathroom.\n"


@pytest.mark.parametrize("text, line, match", [
    (MARY + "2 Where is Mary? bathroom 1\n", 2, "needs its answer and supporting ids after tabs"),
    ("one Mary moved to the bathroom.\n2 Where is Mary?\tbathroom\t1\n", 1, "expected a line id"),
    (MARY + "2 Where is Mary?\tbathroom\t5\n", 2, "supporting id 5 is not a statement line"),
    (MARY + "2 Where is Mary?\tbathroom\t2\n", 2, "supporting id 2 is not a statement line"),
    (MARY + "2 Where is Mary?\tbathroom\t1\n3 John went to the office.\n4 Where is John?\toffice\t2\n", 4,
     "supporting id 2 points at a question line"),
    (MARY + "2 Where is Mary?\tbathroom\tone\n", 2, "supporting id 'one' is not a line number"),
    (MARY + "2 Where is Mary?\tbathroom\t\n", 2, "at least one supporting id"),
    (MARY + "2 Where is Mary?\tbathroom\n", 2, "3 tab-separated fields"),
    (MARY + "2 Where is Mary?\t\t1\n", 2, "empty answer"),
    ("1 Where is Mary?\tbathroom\t1\n", 1, "a question without a story"),
    (MARY + "3 Where is Mary?\tbathroom\t1\n", 2, "expected 2 or 1, got 3"),
    ("0 Mary moved to the bathroom.\n", 1, "expected 1, got 0"),
    ("\u00b2 Mary moved to the bathroom.\n", 1, "expected a line id"),
    (MARY + "2 Where is Mary?\tbathroom\t\u00b9\n", 2, "is not a line number"),
    (MARY + "2 Where is Mary?\tbathroom\t1\n\n\n1 John went to the office.\n2 \n", 6, "empty statement"),
])
def test_malformed_lines_name_the_file_and_line(tmp_path, text, line, match):
    path = tmp_path / "bad.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CorpusError, match=re.escape(f"{path}:{line}: ") + ".*" + re.escape(match)) as info:
        babi.read(str(path))
    assert "\n" not in str(info.value)


def test_files_without_questions_or_text_are_refused(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(CorpusError, match=re.escape(f"{empty}: holds no question line")):
        babi.read(str(empty))
    statements = tmp_path / "statements.txt"
    statements.write_text(MARY, encoding="utf-8")
    with pytest.raises(CorpusError, match="holds no question line"):
        babi.read(str(statements))
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"1 Mary moved to the \xff\xfe.\n")
    with pytest.raises(CorpusError, match=re.escape(f"{binary}: is not UTF-8")):
        babi.read(str(binary))
    with pytest.raises(CorpusNotFoundError, match="No bAbI file or directory at .*missing"):
        babi.read(str(tmp_path / "missing"))
    (tmp_path / "none").mkdir()
    with pytest.raises(CorpusError, match="holds no bAbI \\*.txt file"):
        babi.read(str(tmp_path / "none"))


def test_parse_names_its_source():
    with pytest.raises(CorpusError, match="^stdin:2: "):
        babi.parse(["1 Mary moved to the bathroom.", "2 Where is Mary?"], source="stdin")


def test_the_module_is_tensorflow_free():
    code = ("import sys, zoo.data.babi as b; b.generate(0, 5); "
            "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules")
    result = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
