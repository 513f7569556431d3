"""ListOps (Nangia & Bowman 2018), as the Long Range Arena builds it (Tay et al. 2021): ``data=listops``.

An example is a nested list expression over the digits 0-9 and four operators, and its value, a
digit, is the class to predict (10 classes)::

    [MAX 4 3 [MIN 2 3 ] 1 0 ]            -> 4
    [SM 7 [MED 1 8 5 2 ] 9 ]             -> (7 + int(3.5) + 9) mod 10 = 9

``MAX`` and ``MIN`` of their arguments, ``MED`` their median (``int`` of it: the lower middle value
rounded down when their number is even, as LRA's ``int(np.median(...))``), ``SM`` their sum modulo 10.
The model sees the whole flat token sequence and must track the tree: a test of long-range, structured
reading that LRA runs at 500-2000 tokens.

**Generated** by LRA's rules (``lra_benchmarks/data/listops.py``): from depth 1, a node below
``max_depth`` is an operator with probability 0.25 (else a digit), with 2 to ``max_args`` arguments,
each a node one level deeper; a tree's length counts its digits and, per operator, its opening
token and its ``]``. Trees are drawn until ``train_size + val_size + test_size`` distinct ones have
a length in ``[min_length, max_length]`` (LRA: 500-2000, exclusive; here inclusive, defaults sized
for a CPU). Seeded by ``seed``: the same examples for the same config.

**Read** from LRA's own files with ``path``: one TSV file (``Source<TAB>Target``, a header line; the
examples shuffled with ``seed``, ``val_size`` and ``test_size`` split off, the rest for training) or
LRA's folder holding ``basic_train.tsv``, ``basic_val.tsv`` and ``basic_test.tsv`` (the sizes unused).
LRA's files write each sub-list in parentheses, ``( ( [MAX 4 ) 3 ) ]``; the parentheses repeat what
``[OP`` and ``]`` say and are dropped (here and in the SavedModel), so lengths are LRA's. A bad line
is one ``CorpusError`` naming the file and line (``zoo.catalog.listops_rows``); the config validator
reads each file's first 64 KiB the same way before TensorFlow starts.

References:
    Nangia & Bowman. ListOps: A Diagnostic Dataset for Latent Tree Learning. NAACL SRW 2018.
    https://arxiv.org/abs/1804.06028
    Tay et al. Long Range Arena: A Benchmark for Efficient Transformers. ICLR 2021, sec. 3.1.
    https://arxiv.org/abs/2011.04006
"""

from __future__ import annotations

import hashlib
import random
import statistics
from typing import Dict, List, Sequence, Tuple, Union

from zoo import catalog
from zoo.checks import enforce_config
from zoo.data import tokenizers
from zoo.data.classification import ClassificationTask, token_boundaries
from zoo.data.constraints import LENGTH_RANGE, SPLIT_SIZES
from zoo.data.task import DATASETS
from zoo.errors import ConfigError, CorpusError
from zoo.tokens import SPECIALS

OPERATORS = ("MAX", "MIN", "MED", "SM")
VALUE_P = 0.25  # LRA: a node below max_depth is an operator when random() <= VALUE_P
CLASSES = tuple("0123456789")
VOCABULARY = tuple(SPECIALS) + catalog.LISTOPS_TOKENS
STRIP = r"[()]"  # LRA's parentheses, dropped before tokenizing
# The rules of data.<key>, declared once: the validator reads them before TensorFlow starts
# (zoo.catalog.data_constraints) and build_task raises the same lines.
CONSTRAINTS = SPLIT_SIZES + LENGTH_RANGE + (
    {"rule": "at_least", "key": "max_depth", "min": 1, "integer": True},
    {"rule": "at_least", "key": "max_args", "min": 2, "integer": True},
)

Tree = Union[int, Tuple[str, list]]


def generate_tree(rng: random.Random, max_depth: int = 10, max_args: int = 10, depth: int = 1,
                  limit: float = float("inf")) -> Tuple[Tree, int]:
    """``(tree, length)`` by LRA's ``generate_tree``: a digit, or ``(operator, [arguments])``.

    ``limit``: a tree that grows past this length is abandoned as soon as it does (``(None, length)``,
    the length so far): it would be rejected anyway, and the rejection sampling of ``generate`` then
    costs the trees it keeps, not the huge ones it throws away."""
    if depth < max_depth and rng.random() <= VALUE_P:
        arguments, length = [], 2  # the operator's opening token and its "]"
        for _ in range(rng.randint(2, max_args)):
            argument, size = generate_tree(rng, max_depth, max_args, depth + 1, limit - length)
            length += size
            if argument is None or length > limit:
                return None, length
            arguments.append(argument)
        return (rng.choice(OPERATORS), arguments), length
    return rng.randrange(10), 1


def apply(operator: str, values: Sequence[int]) -> int:
    """One operator on its arguments' values."""
    if operator == "MAX":
        return max(values)
    if operator == "MIN":
        return min(values)
    if operator == "MED":
        return int(statistics.median(values))  # LRA: int(np.median(values))
    if operator == "SM":
        return sum(values) % 10
    raise ValueError(f"Unknown ListOps operator {operator!r}. Available: {', '.join(OPERATORS)}")


def tree_value(tree: Tree) -> int:
    """The value of a tree, from its structure."""
    if isinstance(tree, int):
        return tree
    operator, arguments = tree
    return apply(operator, [tree_value(a) for a in arguments])


def to_string(tree: Tree) -> str:
    """The token string, ``[MAX 4 3 [MIN 2 3 ] 1 0 ]``."""
    if isinstance(tree, int):
        return str(tree)
    operator, arguments = tree
    return " ".join([f"[{operator}", *(to_string(a) for a in arguments), "]"])


def evaluate(expression: str) -> int:
    """The value of an expression string, read token by token with a stack (LRA's parentheses are
    skipped); ``ValueError`` for an expression that is not one well-formed tree."""
    stack: List[Tuple[str, List[int]]] = []
    result = None
    for token in expression.split():
        if token in catalog.LISTOPS_DROPPED:
            continue
        if result is not None:
            raise ValueError(f"ListOps expression goes on after its end: {expression[:60]!r}")
        if token.startswith("[") and token[1:] in OPERATORS:
            stack.append((token[1:], []))
        elif token == "]":
            if not stack or not stack[-1][1]:
                raise ValueError(f"ListOps ']' closes nothing or an empty list: {expression[:60]!r}")
            operator, values = stack.pop()
            value = apply(operator, values)
            if stack:
                stack[-1][1].append(value)
            else:
                result = value
        elif len(token) == 1 and token.isdigit():
            if stack:
                stack[-1][1].append(int(token))
            else:
                result = int(token)
        else:
            raise ValueError(f"{token!r} is not a ListOps token: {expression[:60]!r}")
    if stack or result is None:
        raise ValueError(f"ListOps expression is not closed: {expression[:60]!r}")
    return result


def longest(max_depth: int, max_args: int) -> int:
    """The longest tree the rules can draw: every node an operator of ``max_args`` arguments."""
    length = 1
    for _ in range(max_depth - 1):
        length = max_args * length + 2
    return length


def generate(num_examples: int, seed: int, min_length: int = 100, max_length: int = 500, max_depth: int = 10,
             max_args: int = 10) -> List[Tuple[str, int]]:
    """``num_examples`` distinct ``(expression, value)`` with lengths in ``[min_length, max_length]``.

    Raises:
        ConfigError: when the rules cannot reach ``min_length``, or the draws run out.
    """
    if longest(max_depth, max_args) < min_length:
        raise ConfigError(f"data.min_length={min_length} is longer than any ListOps tree of depth <= {max_depth} "
                          f"with <= {max_args} arguments ({longest(max_depth, max_args)} tokens); lower "
                          f"data.min_length or raise data.max_depth / data.max_args.")
    rng = random.Random(seed)
    out: Dict[str, int] = {}
    draws, budget = 0, 10_000 + 20_000 * num_examples
    while len(out) < num_examples:
        draws += 1
        if draws > budget:
            raise ConfigError(f"ListOps: {budget} trees drawn, {len(out)} of {num_examples} distinct with a length "
                              f"in {min_length}-{max_length}; widen data.min_length/data.max_length or ask for fewer.")
        tree, length = generate_tree(rng, max_depth, max_args, limit=max_length)
        if tree is not None and min_length <= length <= max_length:
            out.setdefault(to_string(tree), tree_value(tree))
    return list(out.items())


def read_examples(path, val_size: int, test_size: int, seed: int) -> Tuple[Dict[str, List[Tuple[str, int]]], dict]:
    """``({split: [(expression, value)]}, info)`` from LRA's folder or one TSV file (see the module)."""
    files = catalog.listops_files(path)
    digest = hashlib.sha256()
    if "all" not in files:
        examples = {}
        for split, file in files.items():
            examples[split] = catalog.read_listops_file(file)
            digest.update(file.read_bytes())
        return examples, {"sha256": digest.hexdigest(), "corpus_file": str(path)}
    file = files["all"]
    rows = catalog.read_listops_file(file)
    if len(rows) <= val_size + test_size:
        raise CorpusError(f"{file} holds {len(rows)} examples: not more than data.val_size={val_size} + "
                          f"data.test_size={test_size}, so none is left for training. Lower them.")
    random.Random(seed).shuffle(rows)
    examples = {"val": rows[:val_size], "test": rows[val_size:val_size + test_size],
                "train": rows[val_size + test_size:]}
    return {s: examples[s] for s in ("train", "val", "test")}, {"sha256": hashlib.sha256(file.read_bytes()).hexdigest(),
                                                                "corpus_file": str(file)}


@DATASETS.register("listops", task="classify")
def build_task(train_size=10000, val_size=500, test_size=1000, min_length=100, max_length=500, max_depth=10,
               max_args=10, path=None, seed=0, **_) -> ClassificationTask:
    """``data=listops``: ListOps expressions -> their value 0-9, generated by LRA's rules or read from LRA's files."""
    enforce_config(CONSTRAINTS, "data", train_size=train_size, val_size=val_size, test_size=test_size,
                   min_length=min_length, max_length=max_length, max_depth=max_depth, max_args=max_args)
    fingerprint = None
    if path:
        examples, info = read_examples(path, int(val_size), int(test_size), int(seed))
        fingerprint = info.pop("sha256")
    else:
        rows = generate(train_size + val_size + test_size, seed, min_length, max_length, max_depth, max_args)
        examples = {"train": rows[:train_size], "val": rows[train_size:train_size + val_size],
                    "test": rows[train_size + val_size:]}
        info = {}
    splits = {split: ([e for e, _ in rows], [v for _, v in rows]) for split, rows in examples.items()}
    lengths = [len(e.split()) for texts, _ in splits.values() for e in texts]
    info.update({"min_tokens": min(lengths), "max_tokens": max(lengths)})
    tokenizer = tokenizers.make_tokenizer("word", list(VOCABULARY), lowercase=False, name="tokenizer")
    return ClassificationTask("listops", splits, tokenizer, CLASSES, max_length=max(lengths), strip=STRIP,
                              fingerprint=fingerprint, info=info,
                              bucket_boundaries=token_boundaries(splits["train"][0]))
