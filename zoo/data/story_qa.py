"""The story-QA task (``data=story_qa``): short stories, a question, a one-word answer, gold evidence.

Examples come from ``zoo.data.babi``: generated from the seed (no download, no file), or read
from a user's files in the standard bAbI text format (``data.path``, optionally ``data.test_path``).
``build_task`` returns a ``QATask``: the examples per split, one word tokenizer for stories,
questions and answers, and the sizes the models and the SavedModel need.

**The story string** (what the SavedModel and the pyfunc model take): the statements in order,
one per line (``"Mary moved to the bathroom.\\nJohn went to the hallway."``); a ``.``, ``!`` or
``?`` followed by a space also ends a sentence, so ``"Mary moved to the bathroom. John went
to the hallway."`` is the same story. Empty lines are ignored. The last ``memory_size``
sentences are kept (Sukhbaatar et al. 2015 keep the 50 most recent), each at most
``max_words`` tokens. ``encode_text`` is that rule as TensorFlow ops, used to encode the
training data and inside the SavedModel alike.

Batches: ``((story [B, S, W] int32, question [B, Wq] int32), answer [B, 1] int32)``, padded with
0, bucketed by the number of sentences; ``arrays(task, split)`` also gives the gold
supporting sentences (multi-hot ``[N, S]``) and the kind of each question, for the metrics.

This module imports TensorFlow only inside its functions.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from zoo.checks import enforce_config
from zoo.data import tokenizers
from zoo.data.babi import KINDS
from zoo.data.task import DATASETS, length_boundaries
from zoo.errors import ConfigError

SENTENCE_END = r"([.!?])[ \t]+"  # a sentence also ends at . ! ? followed by a space


@dataclasses.dataclass
class QATask:
    """A question-answering task: examples per split and the shared word tokenizer.

    ``examples[split]`` are ``zoo.data.babi.Example`` (story, question, answer, supporting, kind).
    Answers are words of the same vocabulary as stories and questions; a model scores every
    word of it.
    """

    name: str
    examples: Dict[str, list]
    tokenizer: object
    memory_size: int  # sentences kept (the last ones)
    max_words: int  # tokens kept per sentence
    max_question_words: int
    kinds: Tuple[str, ...]
    metric: str = "accuracy"
    fingerprint: Optional[str] = None
    attribution: Optional[str] = None
    info: Dict[str, object] = dataclasses.field(default_factory=dict)
    bucket_boundaries: Optional[List[int]] = None  # on the number of sentences

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def stats(self) -> Dict[str, object]:
        out = {"vocab_size": self.vocab_size, "memory_size": self.memory_size, "max_words": self.max_words}
        for split, examples in self.examples.items():
            out[f"{split}_examples"] = len(examples)
        out.update(self.info)
        return out

    def split_texts(self):
        """``(split, texts, profile)`` per split, what the run logs as its datasets: one text per
        example (story, question and answer), and the split's size and vocabulary."""
        for split, examples in self.examples.items():
            texts = ["\n".join(e.story) + "\t" + e.question + "\t" + e.answer for e in examples]
            yield split, texts, {"examples": len(examples), "vocab_size": self.vocab_size}


def story_text(story: Sequence[str]) -> str:
    """The story string of a list of statements: one per line (see the module docstring)."""
    return "\n".join(story)


def _split_sentences(stories):
    import tensorflow as tf

    text = tf.strings.regex_replace(stories, SENTENCE_END, "\\1\n")
    lines = tf.strings.strip(tf.strings.split(text, "\n"))  # ragged [B, S]
    return tf.ragged.boolean_mask(lines, tf.strings.length(lines) > 0)


def encode_text(tokenizer, stories, questions, memory_size: int, max_words: int, max_question_words: int):
    """Strings ``[B]`` -> ``(story [B, S, W] int32, question [B, Wq] int32, sentences ragged [B, S]
    strings, story_tokens [B, S, W] strings)``; at least one sentence and one word (all padding
    where the story is empty). In-graph: the SavedModel runs it on raw strings."""
    import tensorflow as tf

    sentences = _split_sentences(stories)[:, -memory_size:]
    tokens = tokenizer.split(sentences.flat_values)[:, :max_words]  # ragged [N, W]
    tokens = sentences.with_flat_values(tokens)  # [B, S, W]
    ids = tf.cast(tokenizer.lookup(tokens), tf.int32)
    story = ids.to_tensor(default_value=0)
    story_tokens = tokens.to_tensor(default_value="")
    shape = tf.shape(story)
    pad = [[0, 0], [0, tf.maximum(1 - shape[1], 0)], [0, tf.maximum(1 - shape[2], 0)]]
    story = tf.pad(story, pad)
    story_tokens = tf.pad(story_tokens, pad, constant_values="")
    question = tf.cast(tokenizer.tokenize(questions)[:, :max_question_words], tf.int32).to_tensor(default_value=0)
    question = tf.pad(question, [[0, 0], [0, tf.maximum(1 - tf.shape(question)[1], 0)]])
    return story, question, sentences, story_tokens


# The rules of data.<key>, declared once: the validator reads them before TensorFlow starts
# (zoo.catalog.data_constraints) and build_task raises the same lines (zoo.checks.problem_lines).
CONSTRAINTS = (
    {"rule": "at_least", "key": "train_size", "min": 1, "integer": True},
    {"rule": "at_least", "key": "val_size", "min": 1, "integer": True},
    {"rule": "at_least", "key": "test_size", "min": 1, "integer": True},
    {"rule": "subset_of", "key": "kinds", "values": KINDS},
    {"rule": "at_least", "key": "min_sentences", "min": 1, "integer": True},
    {"rule": "not_above", "key": "min_sentences", "of": "max_sentences"},
    {"rule": "at_most", "key": "max_sentences", "max": 50, "integer": True, "why": "stories have at most 50 sentences"},
    {"rule": "at_least", "key": "max_sentences", "min": 1, "integer": True},
    {"rule": "at_least", "key": "memory_size", "min": 1, "integer": True},
    {"rule": "at_least", "key": "min_freq", "min": 1, "integer": True},
)


def _read_split(path: str, what: str) -> list:
    import os

    from zoo.data import babi

    if not os.path.exists(path):
        raise ConfigError(f"data.{what}={path} does not exist: give a bAbI text file or a directory of *.txt files.")
    examples = babi.read(path)
    if not examples:
        raise ConfigError(f"data.{what}={path} holds no question: expected bAbI lines like "
                          f"'3 Where is Mary?<TAB>bathroom<TAB>1'.")
    return examples


def _truncate(example, memory_size: int):
    """The example with only the last ``memory_size`` statements (supporting ids shifted; None
    when a supporting sentence falls out of the memory)."""
    drop = len(example.story) - memory_size
    if drop <= 0:
        return example
    supporting = tuple(i - drop for i in example.supporting)
    if min(supporting) < 0:
        return None
    return dataclasses.replace(example, story=example.story[drop:], supporting=supporting)


@DATASETS.register("story_qa", task="qa")
def build_task(seed: int = 0, train_size: int = 10000, val_size: int = 1000, test_size: int = 1000,
               kinds: Sequence[str] = ("single_fact", "two_facts", "yes_no", "counting", "relation"),
               min_sentences: int = 2, max_sentences: int = 12, memory_size: int = 50,
               path: Optional[str] = None, test_path: Optional[str] = None, min_freq: int = 2) -> QATask:
    """``data=story_qa``: generated stories (``path: null``) or a user's bAbI files.

    Generated: ``train_size + val_size + test_size`` examples from ``zoo.data.babi.generate(seed)``,
    split in that order. Read: every question of ``path`` (a file or a directory of ``*.txt``),
    shuffled with ``seed``, the first ``val_size`` for validation, the next ``test_size`` for test
    (or all of ``test_path`` when given), the rest for training.
    """
    from zoo.data import babi

    kinds = tuple(kinds)
    enforce_config(CONSTRAINTS, "data", train_size=train_size, val_size=val_size, test_size=test_size,
                   kinds=list(kinds), min_sentences=min_sentences, max_sentences=max_sentences,
                   memory_size=memory_size, min_freq=min_freq)
    fingerprint = None
    if path is None:
        if test_path is not None:
            raise ConfigError("data.test_path needs data.path (the training file or directory) as well.")
        every = babi.generate(seed, train_size + val_size + test_size, kinds=kinds, max_sentences=max_sentences,
                              min_sentences=min_sentences)
        splits = {"train": every[:train_size], "val": every[train_size:train_size + val_size],
                  "test": every[train_size + val_size:]}
    else:
        every = _read_split(str(path), "path")
        random.Random(seed).shuffle(every)
        if test_path is not None:
            test = _read_split(str(test_path), "test_path")
            splits = {"val": every[:val_size], "train": every[val_size:], "test": test}
        else:
            splits = {"val": every[:val_size], "test": every[val_size:val_size + test_size],
                      "train": every[val_size + test_size:]}
        if not splits["train"]:
            raise ConfigError(f"data.path={path} has {len(every)} questions, none left for training after "
                              f"data.val_size={val_size} and data.test_size={test_size}: lower them.")
        fingerprint = _fingerprint([path] + ([test_path] if test_path else []))
    dropped = 0
    for split, examples in splits.items():
        kept = [t for t in (_truncate(e, memory_size) for e in examples) if t is not None]
        dropped += len(examples) - len(kept)
        splits[split] = kept
    train = splits["train"]
    texts = [s for e in train for s in e.story] + [e.question for e in train] + [e.answer for e in train]
    tokenizer = tokenizers.fit_tokenizer("word", texts, lowercase=True, min_freq=min_freq, name="words")
    sentence_words = tokenizer.python_split([s for e in train for s in e.story] or [""])
    question_words = tokenizer.python_split([e.question for e in train] or [""])
    max_words = max(len(w) for w in sentence_words)
    max_question_words = max(len(w) for w in question_words)
    lengths = [len(e.story) for e in train]
    present = tuple(k for k in babi.KINDS if any(e.kind == k for s in splits.values() for e in s))
    info = {"dropped_out_of_memory": dropped, "max_story_sentences": max(lengths),
            "mean_story_sentences": round(float(np.mean(lengths)), 2)}
    return QATask(name="story_qa", examples=splits, tokenizer=tokenizer, memory_size=int(memory_size),
                  max_words=max_words, max_question_words=max_question_words, kinds=present,
                  fingerprint=fingerprint, info=info, bucket_boundaries=length_boundaries(lengths) or None)


def _fingerprint(paths) -> str:
    import hashlib
    import os

    digest = hashlib.sha256()
    for path in paths:
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(path, f) for f in os.listdir(path) if f.endswith(".txt"))
        for name in files:
            with open(name, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


def arrays(task: QATask, split: str, batch_size: int = 1024) -> Dict[str, np.ndarray]:
    """Encoded ``split``: ``story [N, S, W]``, ``question [N, Wq]``, ``answer [N]`` (int32),
    ``sentences [N]`` (statements kept), ``supporting [N, S]`` bool and ``kind [N]`` (index into
    ``task.kinds``), padded to the split's largest sizes."""
    import tensorflow as tf

    examples = task.examples[split]
    stories, questions, s_len, w_len = [], [], 0, 0
    for start in range(0, len(examples), batch_size):
        chunk = examples[start:start + batch_size]
        story, question, _, _ = encode_text(task.tokenizer, tf.constant([story_text(e.story) for e in chunk]),
                                            tf.constant([e.question for e in chunk]), task.memory_size,
                                            task.max_words, task.max_question_words)
        stories.append(story.numpy())
        questions.append(question.numpy())
        s_len, w_len = max(s_len, stories[-1].shape[1]), max(w_len, stories[-1].shape[2])
    q_len = max(q.shape[1] for q in questions)
    story = np.concatenate([np.pad(s, [(0, 0), (0, s_len - s.shape[1]), (0, w_len - s.shape[2])]) for s in stories])
    question = np.concatenate([np.pad(q, [(0, 0), (0, q_len - q.shape[1])]) for q in questions])
    answer = tf.cast(task.tokenizer.lookup(tf.constant([e.answer.lower() for e in examples])), tf.int32).numpy()
    supporting = np.zeros(story.shape[:2], bool)
    for i, e in enumerate(examples):
        supporting[i, list(e.supporting)] = True
    return {"story": story, "question": question, "answer": answer,
            "sentences": np.array([len(e.story) for e in examples], np.int32), "supporting": supporting,
            "kind": np.array([task.kinds.index(e.kind) for e in examples], np.int32)}


def make_dataset(task: QATask, split: str, batch_size: int, shuffle: bool = False, seed: int = 0,
                 bucket_boundaries=None, encoded: Optional[Dict[str, np.ndarray]] = None):
    """``((story, question), answer [B, 1])`` batches; each batch padded to its longest story.

    Training batches (``shuffle``) are bucketed by the number of sentences (``bucket_boundaries``:
    a list, or None for the task's own quantiles)."""
    import tensorflow as tf

    data = encoded if encoded is not None else arrays(task, split)
    ds = tf.data.Dataset.from_tensor_slices((data["story"], data["question"], data["answer"], data["sentences"]))
    ds = ds.cache()
    if shuffle:
        ds = ds.shuffle(len(data["answer"]), seed=seed, reshuffle_each_iteration=True)
    ds = ds.map(lambda s, q, a, n: ((s[:tf.maximum(n, 1)], q), tf.reshape(a, [1])),
                num_parallel_calls=tf.data.AUTOTUNE)
    boundaries = (list(bucket_boundaries) if bucket_boundaries is not None else task.bucket_boundaries) \
        if shuffle else None
    if boundaries:
        ds = ds.bucket_by_sequence_length(lambda x, y: tf.shape(x[0])[0], bucket_boundaries=boundaries,
                                          bucket_batch_sizes=[batch_size] * (len(boundaries) + 1))
    else:
        ds = ds.padded_batch(batch_size)
    return ds.prefetch(tf.data.AUTOTUNE)
