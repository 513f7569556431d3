"""Stories with questions and gold evidence: a generator and the bAbI text format (pure Python).

A story is people moving between places and picking up, dropping and handing over objects; a
question about it has a one-word answer and the ids of the sentences that support it, so a
reader's attention can be checked against the evidence. ``generate`` writes such examples
deterministically from a seed (no download, no file); ``parse`` / ``read`` / ``write`` speak the
standard bAbI text format (Weston et al. 2015), so users bring their own bAbI files::

    1 Mary moved to the bathroom.
    2 John went to the hallway.
    3 Where is Mary?<TAB>bathroom<TAB>1

Numbering restarts at 1 for a new story; question lines are numbered too and their supporting ids
are line numbers of statements of the same story; the story of a question is every statement of
its story before it (several questions may share a story). ``Example.supporting`` holds 0-based
indices into ``Example.story``.

The kinds of question (``KINDS``), the first four as in bAbI tasks 1, 2, 6 and 7:

- ``single_fact``  "Where is Mary?": her place; evidence: her latest move.
- ``two_facts``    "Where is the football?": the place of its holder (evidence: how the holder got
  it and the holder's latest move) or where it was dropped (evidence: the drop and the dropper's
  latest move before it).
- ``yes_no``       "Is Mary in the kitchen?": yes or no, half each; evidence: her latest move.
- ``counting``     "How many objects is Mary carrying?": ``none``, ``one``, ``two``, ...;
  evidence: every sentence that changed what she carries.
- ``relation``     "Are Mary and John in the same place?": yes or no, half each; evidence: each
  one's latest move.

Every generated question is answerable from its story alone and unambiguous: a person is asked
about only once a move has placed them, an object only once someone held it, and people act only
where they are known to be (a hand-over needs both people in the same place, picking up a dropped
object needs the picker where it lies).

The kind is not written to files: bAbI has no field for it. ``parse`` infers it from the question
(``infer_kind``), which gives back the generator's kind for every generated question, so
``read(write(x)) == x``; a question of another form (other bAbI tasks) is ``single_fact`` when one
sentence supports it and ``two_facts`` when more do.

Malformed input raises ``zoo.errors.CorpusError`` naming the file and the line.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import random
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from zoo.errors import ConfigError, CorpusError, CorpusNotFoundError

KINDS = ("single_fact", "two_facts", "yes_no", "counting", "relation")
MAX_SENTENCES = 50

PERSONS = ("Mary", "John", "Sandra", "Daniel")
PLACES = ("bathroom", "kitchen", "garden", "hallway", "office", "bedroom")
OBJECTS = ("football", "apple", "milk", "book")
COUNT_WORDS = ("none", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")

MOVE_VERBS = ("moved to", "went to", "journeyed to", "travelled to")
PICK_VERBS = ("picked up", "got", "grabbed")
DROP_VERBS = ("dropped", "put down", "discarded")
GIVE_VERBS = ("handed", "gave")


@dataclasses.dataclass(frozen=True)
class Example:
    """One question about one story.

    Attributes:
        story: the statements before the question, in order, e.g. ``"Mary moved to the bathroom."``.
        question: e.g. ``"Where is Mary?"``.
        answer: one token, lower case: a word of the story, ``yes``/``no``, or a count word.
        supporting: 0-based indices into ``story`` of the gold supporting sentences (non-empty).
        kind: one of ``KINDS``.
    """

    story: Tuple[str, ...]
    question: str
    answer: str
    supporting: Tuple[int, ...]
    kind: str


# --- generating -------------------------------------------------------------------------------

class _World:
    """The state a story has built so far, and for each fact the sentence that established it."""

    def __init__(self):
        self.sentences: List[str] = []
        self.place: Dict[str, str] = {}          # person -> place
        self.last_move: Dict[str, int] = {}      # person -> index of their latest move
        self.moves: Dict[str, List[int]] = {}    # person -> indices of all their moves
        self.holder: Dict[str, str] = {}         # object -> person holding it
        self.got: Dict[str, int] = {}            # object -> index of the sentence its holder got it by
        self.floor: Dict[str, Tuple[str, int, int]] = {}  # object -> (place, drop index, dropper's move index)
        self.touched: Dict[str, List[int]] = {}  # person -> sentences that changed what they carry

    def carried(self, person: str) -> List[str]:
        return [o for o in OBJECTS if self.holder.get(o) == person]

    def pickable(self, person: str) -> List[str]:
        here = self.place.get(person)
        return [o for o in OBJECTS if o not in self.holder and (o not in self.floor or self.floor[o][0] == here)]

    def _say(self, sentence: str) -> int:
        self.sentences.append(sentence)
        return len(self.sentences) - 1

    def move(self, rng: random.Random, person: str) -> None:
        place = rng.choice([p for p in PLACES if p != self.place.get(person)])
        i = self._say(f"{person} {rng.choice(MOVE_VERBS)} the {place}.")
        self.place[person] = place
        self.last_move[person] = i
        self.moves.setdefault(person, []).append(i)

    def pick(self, rng: random.Random, person: str, obj: str) -> None:
        i = self._say(f"{person} {rng.choice(PICK_VERBS)} the {obj}.")
        self.holder[obj], self.got[obj] = person, i
        self.floor.pop(obj, None)
        self.touched.setdefault(person, []).append(i)

    def drop(self, rng: random.Random, person: str, obj: str) -> None:
        i = self._say(f"{person} {rng.choice(DROP_VERBS)} the {obj}.")
        del self.holder[obj], self.got[obj]
        self.floor[obj] = (self.place[person], i, self.last_move[person])
        self.touched.setdefault(person, []).append(i)

    def give(self, rng: random.Random, person: str, obj: str, other: str) -> None:
        i = self._say(f"{person} {rng.choice(GIVE_VERBS)} the {obj} to {other}.")
        self.holder[obj], self.got[obj] = other, i
        self.touched.setdefault(person, []).append(i)
        self.touched.setdefault(other, []).append(i)

    def step(self, rng: random.Random) -> None:
        """One random statement that the state allows."""
        person = rng.choice(PERSONS)
        if person not in self.place:
            return self.move(rng, person)
        options: List[Tuple[str, int]] = [("move", 3)]
        if self.pickable(person):
            options.append(("pick", 2))
        carried = self.carried(person)
        others = [q for q in PERSONS if q != person and self.place.get(q) == self.place[person]]
        if carried:
            options.append(("drop", 1))
            if others:
                options.append(("give", 2))
        action = rng.choices([a for a, _ in options], weights=[w for _, w in options])[0]
        if action == "move":
            self.move(rng, person)
        elif action == "pick":
            self.pick(rng, person, rng.choice(self.pickable(person)))
        elif action == "drop":
            self.drop(rng, person, rng.choice(carried))
        else:
            self.give(rng, person, rng.choice(carried), rng.choice(others))


def _question(world: _World, kind: str, yes: bool,
              rng: random.Random) -> Optional[Tuple[str, str, Tuple[int, ...]]]:
    """A question of ``kind`` the world answers, as ``(question, answer, supporting)``, or None;
    ``yes`` is the answer a yes/no question must have."""
    placed = sorted(world.place)
    if kind in ("single_fact", "yes_no"):
        if not placed:
            return None
        person = rng.choice(placed)
        evidence = (world.last_move[person],)
        if kind == "single_fact":
            return f"Where is {person}?", world.place[person], evidence
        place = world.place[person] if yes else \
            rng.choice([p for p in PLACES if p != world.place[person]])
        return f"Is {person} in the {place}?", "yes" if place == world.place[person] else "no", evidence
    if kind == "two_facts":
        objects = sorted(set(world.holder) | set(world.floor))
        if not objects:
            return None
        obj = rng.choice(objects)
        if obj in world.holder:
            holder = world.holder[obj]
            return (f"Where is the {obj}?", world.place[holder],
                    tuple(sorted((world.got[obj], world.last_move[holder]))))
        place, dropped, moved = world.floor[obj]
        return f"Where is the {obj}?", place, (moved, dropped)
    if kind == "counting":
        people = sorted(world.touched)
        if not people:
            return None
        person = rng.choice(people)
        return (f"How many objects is {person} carrying?", COUNT_WORDS[len(world.carried(person))],
                tuple(world.touched[person]))
    if kind == "relation":
        if len(placed) < 2:
            return None
        pairs = [(a, b) for a in placed for b in placed if a < b and (world.place[a] == world.place[b]) == yes]
        if not pairs:
            return None
        a, b = rng.choice(pairs)
        if rng.random() < 0.5:
            a, b = b, a
        return (f"Are {a} and {b} in the same place?", "yes" if yes else "no",
                tuple(sorted((world.last_move[a], world.last_move[b]))))
    raise ConfigError(f"Unknown question kind {kind!r}. Available: {', '.join(KINDS)}")


def _check_generate(seed, num_examples, kinds, max_sentences, min_sentences) -> None:
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"The story seed must be an integer. Received: seed={seed!r}")
    if not isinstance(num_examples, int) or isinstance(num_examples, bool) or num_examples < 0:
        raise ConfigError(f"num_examples must be a non-negative integer. Received: num_examples={num_examples!r}")
    if isinstance(kinds, str) or not kinds or any(k not in KINDS for k in kinds):
        raise ConfigError(f"kinds must be a non-empty list of question kinds from {', '.join(KINDS)}. "
                          f"Received: kinds={kinds!r}")
    if not (isinstance(min_sentences, int) and isinstance(max_sentences, int)
            and 2 <= min_sentences <= max_sentences <= MAX_SENTENCES):
        raise ConfigError(f"Story lengths must be integers with 2 <= min_sentences <= max_sentences <= "
                          f"{MAX_SENTENCES}. Received: min_sentences={min_sentences!r}, "
                          f"max_sentences={max_sentences!r}")


def generate(seed: int, num_examples: int, kinds: Sequence[str] = KINDS, max_sentences: int = 12,
             min_sentences: int = 2) -> List[Example]:
    """``num_examples`` stories with one question each, the same for the same arguments.

    Example ``i`` asks a question of kind ``kinds[i % len(kinds)]`` (so the kinds are even); its
    story has a length drawn uniformly from ``[min_sentences, max_sentences]`` and is drawn again
    until a question of that kind has an answer (yes/no answers are drawn half and half first).

    Raises:
        ConfigError: for an unknown kind or lengths outside ``2 <= min <= max <= 50``.
    """
    _check_generate(seed, num_examples, kinds, max_sentences, min_sentences)
    kinds = tuple(kinds)
    rng = random.Random(seed)
    examples: List[Example] = []
    for i in range(num_examples):
        kind = kinds[i % len(kinds)]
        yes = rng.random() < 0.5
        while True:
            world = _World()
            for _ in range(rng.randint(min_sentences, max_sentences)):
                world.step(rng)
            found = _question(world, kind, yes, rng)
            if found is not None:
                question, answer, supporting = found
                examples.append(Example(tuple(world.sentences), question, answer, supporting, kind))
                break
    return examples


# --- the bAbI text format -----------------------------------------------------------------------

_WORD = r"[A-Za-z][\w'-]*"
_KIND_PATTERNS = (
    ("counting", re.compile(r"how many\b", re.I)),
    ("relation", re.compile(rf"are {_WORD} and {_WORD} in the same place\?$", re.I)),
    ("two_facts", re.compile(rf"where is the {_WORD}\?$", re.I)),
    ("single_fact", re.compile(rf"where is {_WORD}\?$", re.I)),
    ("yes_no", re.compile(rf"is {_WORD} in the {_WORD}\?$", re.I)),
)


def infer_kind(question: str, answer: str, supporting: Sequence[int]) -> str:
    """The kind of a question from its words (see the module docstring): the generator's five
    forms are recognised; any other yes/no question is ``yes_no``, any other one
    ``single_fact`` with one supporting sentence and ``two_facts`` with more."""
    question = " ".join(question.split())
    for kind, pattern in _KIND_PATTERNS:
        if pattern.match(question):
            return kind
    if answer in ("yes", "no"):
        return "yes_no"
    return "single_fact" if len(supporting) == 1 else "two_facts"


def _fail(source: str, number: int, line: str, what: str) -> None:
    raise CorpusError(f"{source}:{number}: {what}. Received: {line[:80]!r}")


def parse(lines: Iterable[str], source: str = "<lines>") -> List[Example]:
    """Examples from lines of bAbI text; ``source`` names the input in error messages.

    Blank lines are skipped. A statement line is ``<id> <sentence>``; a question line is
    ``<id> <question>\\t<answer>\\t<supporting ids>`` (ids separated by spaces). Ids count up from
    1 within a story; an id of 1 starts a new story.

    Raises:
        CorpusError: ``<source>:<line>: <what is wrong>`` for a malformed line, or when the input
            holds no question.
    """
    examples: List[Example] = []
    statements: List[str] = []  # the current story's statements
    index_of: Dict[int, int] = {}  # line id -> index into statements
    questions: set = set()  # line ids of the current story's questions
    last_id = 0
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue

        fail = functools.partial(_fail, source, number, line)
        head, _, rest = line.lstrip().partition(" ")
        if not (head.isascii() and head.isdigit()):
            fail("expected a line id (a positive integer) then a space, as in "
                 "'1 Mary moved to the bathroom.'")
        line_id = int(head)
        if line_id == 1:
            statements, index_of, questions = [], {}, set()
        elif line_id != last_id + 1:
            expected = "1" if last_id == 0 else f"{last_id + 1} or 1"
            fail(f"line ids count up by one within a story (1 starts a new one): expected {expected}, "
                 f"got {line_id}")
        last_id = line_id
        if "\t" not in rest:
            text = rest.strip()
            if not text:
                fail("empty statement")
            if "?" in text:
                fail("a question needs its answer and supporting ids after tabs: "
                     "'<id> <question>\\t<answer>\\t<supporting ids>'")
            index_of[line_id] = len(statements)
            statements.append(text)
            continue
        fields = rest.split("\t")
        if len(fields) != 3:
            fail(f"a question line has 3 tab-separated fields '<id> <question>\\t<answer>\\t<supporting ids>', "
                 f"found {len(fields)}")
        question, answer, ids = (f.strip() for f in fields)
        if not question:
            fail("empty question")
        if not answer:
            fail("empty answer")
        if not statements:
            fail("a question without a story: no statement line comes before it in its story")
        supporting: List[int] = []
        for token in ids.split():
            if not (token.isascii() and token.isdigit()):
                fail(f"supporting id {token!r} is not a line number")
            ref = int(token)
            if ref in questions:
                fail(f"supporting id {ref} points at a question line, not a statement")
            if ref not in index_of:
                fail(f"supporting id {ref} is not a statement line of this story before the question "
                     f"(statements: {', '.join(map(str, sorted(index_of)))})")
            supporting.append(index_of[ref])
        if not supporting:
            fail("a question needs at least one supporting id")
        questions.add(line_id)
        answer = answer.lower()
        examples.append(Example(tuple(statements), question, answer, tuple(supporting),
                                infer_kind(question, answer, supporting)))
    if not examples:
        raise CorpusError(f"{source}: holds no question line; a bAbI file has lines like "
                          f"'1 Mary moved to the bathroom.' and '2 Where is Mary?\\tbathroom\\t1'")
    return examples


def _files(path: str) -> List[str]:
    if os.path.isdir(path):
        found = sorted(os.path.join(path, f) for f in os.listdir(path)
                       if f.endswith(".txt") and os.path.isfile(os.path.join(path, f)))
        if not found:
            raise CorpusError(f"The directory {path} holds no bAbI *.txt file; give a file or a directory of them.")
        return found
    if not os.path.isfile(path):
        raise CorpusNotFoundError(f"No bAbI file or directory at {path}; data.path must name a bAbI text file "
                                  f"or a directory of *.txt files.")
    return [path]


def read(path: str) -> List[Example]:
    """The examples of a bAbI file, or of every ``*.txt`` file of a directory in sorted order.

    Raises:
        CorpusNotFoundError: nothing at ``path``.
        CorpusError: a malformed line (file and line number), a file that is not UTF-8 or holds no
            question, a directory without ``*.txt`` files.
    """
    path = os.fspath(path)
    examples: List[Example] = []
    for file in _files(path):
        try:
            with open(file, encoding="utf-8-sig") as f:  # a byte-order mark is not part of line 1
                examples.extend(parse(f, source=file))
        except UnicodeDecodeError as e:
            raise CorpusError(f"{file}: is not UTF-8 text ({e.reason} at byte {e.start}).") from None
    return examples


def write(path: str, examples: Sequence[Example]) -> None:
    """Writes ``examples`` in bAbI format to the file ``path``, one story per example (ids restart
    at 1), creating its directory. The kind is not written; ``read`` infers it (module docstring)."""
    path = os.fspath(path)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for ex in examples:
            for i, sentence in enumerate(ex.story, start=1):
                f.write(f"{i} {sentence}\n")
            ids = " ".join(str(s + 1) for s in ex.supporting)
            f.write(f"{len(ex.story) + 1} {ex.question}\t{ex.answer}\t{ids}\n")
