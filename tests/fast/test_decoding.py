"""``zoo.fast.decoding``: the searches decode the same ids with ``kernels=fast`` as with ``reference``
(greedy, beam search of size 1 and 4 with length and coverage penalties, sampling with a seed and
temperature, top-k and top-p), on tiny models of a narrow and of a wide vocabulary; and each
replaced ranking or filter equals its reference on random rows, ties and wide rows included."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from models.test_models import SOURCE, TINY

import zoo.models
from zoo import kernels
from zoo.decoding import beam_search, greedy_decode_with_scores, sample_decode, sampling
from zoo.decoding.beam_search import best_continuations
from zoo.fast import decoding as fast

SRC_VOCAB, NARROW, WIDE = 13, 15, 2500  # WIDE: over 2,048 words, the fast paths' slices and histograms
MAX_LENGTH = 4  # four steps: the state (and beam search's reordered rows) carried three times; each more runs the same code


def test_the_replacements_are_registered_without_a_custom_gradient():
    """Decoding has no gradient of its own: the replacements stay in exported SavedModels too."""
    for reference, replacement in ((sampling.top_k_rows, fast.top_k_rows), (sampling.nucleus, fast.nucleus),
                                   (best_continuations, fast.best_continuations)):
        with kernels.using("fast"):
            assert kernels.replacement(reference.key) is replacement
            with kernels.exporting():
                assert kernels.replacement(reference.key) is replacement
        with kernels.using("reference"):
            assert kernels.replacement(reference.key) is None


# --- the replaced functions on random rows -------------------------------------------------------


@pytest.mark.parametrize("width", [300, 2048, 2500, 8000])
def test_top_k_rows_through_slice_maxima_is_top_k(width):
    """Values and indices of tf.math.top_k, ties to the lower index: widths that fill their slices
    and one that pads the last, rows whose best values share a slice, and rows of many equal values;
    k = 40 (top-k sampling's filter) in slices narrower than the 64 of a small k."""
    rng = np.random.default_rng(0)
    values = rng.normal(size=(6, width)).astype("float32")
    values[1, 70:78] = 50.0 + np.arange(8)  # the 8 best in one slice
    values[2] = np.round(values[2])  # many ties
    values[3, ::97] = 9.0  # equal best values in different slices
    values[4, -3:] = 20.0  # the best in the (padded) last slice
    values[5] = 1.0  # all equal
    if width >= 2048:
        assert fast.slice_width(width, 8) is not None  # the slices' path, not top_k itself
        assert fast.slice_width(width, 40) is not None
    for k in (1, 2, 8, 40):
        top, index = fast.top_k_rows(tf.constant(values), k)
        expected = sampling.top_k_rows.reference(tf.constant(values), k)
        np.testing.assert_array_equal(top.numpy(), expected.values.numpy())
        np.testing.assert_array_equal(index.numpy(), expected.indices.numpy())


@pytest.mark.parametrize("width", [40, 1024, 1500, 2500])
def test_best_continuations_rank_as_top_k_of_the_sums(width):
    """The n best of score + log_softmax(logits) over each sentence's K hypotheses and V words, as
    the reference's top_k of the written-out sums gives them: a narrow vocabulary (the sums' path),
    ones that fill their slices and pad the last; the best words of two hypotheses in one slice each,
    a dead hypothesis (score -1e9), equal logits, and hypotheses whose scores reorder their logits."""
    rng = np.random.default_rng(1)
    batch, k = 3, 4
    logits = (3.0 * rng.normal(size=(batch * k, width))).astype("float32")
    scores = rng.normal(size=(batch, k)).astype("float32") - 2.0
    logits[0, 3:11] = 30.0 + np.arange(8)  # hypothesis 0's eight best words in one slice
    logits[1, 3:11] = 30.0 + np.arange(8)  # hypothesis 1: the same logits, a different score
    scores[0, 3] = -1e9  # a dead hypothesis: never ranked above a live one
    logits[5] = 1.0  # one word as good as every other
    logits[-1, -2:] = 40.0  # the best in the (padded) last slice
    for n in (1, 2, 8):
        values, index = fast.best_continuations(tf.constant(logits), tf.constant(scores), n)
        expected = best_continuations.reference(tf.constant(logits), tf.constant(scores), n)
        np.testing.assert_array_equal(index.numpy(), expected.indices.numpy())
        np.testing.assert_allclose(values.numpy(), expected.values.numpy(), rtol=1e-6, atol=1e-4)


def _nucleus_definition(logits, top_p):
    """The nucleus by its definition, in float64 NumPy: sort, exclusive cumulative sum, every token at
    or above the least likely kept one."""
    keep = np.zeros(logits.shape, bool)
    for row, z in enumerate(logits.astype("float64")):
        p = np.exp(z - z.max())
        p /= p.sum()
        order = np.argsort(-z, kind="stable")
        before = np.concatenate([[0.0], np.cumsum(p[order])[:-1]])
        keep[row] = z >= z[order[before < top_p]].min()
    return keep


@pytest.mark.parametrize("width", [50, 300, 2048, 8000])
def test_the_nucleus_without_a_sort_is_the_sorted_definition(width):
    """nucleus(): the reference (a sort) and the fast path (narrow rows sorted, wide ones, >= 2,048,
    through histograms of their bits) both equal to the definition on flat and peaked rows, ties,
    -0.0 beside 0.0, and -inf (a top-k filter before it)."""
    rng = np.random.default_rng(width)
    rows = np.concatenate([
        rng.normal(size=(4, width)),  # flat: the nucleus is most of the row
        6 * rng.normal(size=(4, width)),  # peaked: a few tokens
        np.round(2 * rng.normal(size=(4, width))) / 2,  # many ties
        np.where(rng.random((2, width)) < 0.5, 0.0, -0.0) + np.where(rng.random((2, width)) < 0.3,
                                                                      rng.normal(size=(2, width)), 0.0),
        np.where(rng.random((2, width)) < 0.5, -np.inf, rng.normal(size=(2, width))),
    ]).astype("float32")
    for top_p in (0.1, 0.5, 0.9, 0.999):
        definition = _nucleus_definition(rows, top_p)
        np.testing.assert_array_equal(sampling.nucleus.reference(tf.constant(rows), top_p).numpy(), definition,
                                      err_msg=f"reference, top_p={top_p}")
        np.testing.assert_array_equal(fast.nucleus(tf.constant(rows), top_p).numpy(), definition,
                                      err_msg=f"fast, top_p={top_p}")
    for mode in kernels.MODES:
        with kernels.using(mode):
            filtered = sampling.filter_logits(tf.constant(rows), top_k=40, top_p=0.9).numpy()
        kept_k = rows >= np.sort(rows, axis=-1)[:, -40:-39]
        np.testing.assert_array_equal(np.isfinite(filtered),
                                      _nucleus_definition(np.where(kept_k, rows, -np.inf), 0.9) & kept_k,
                                      err_msg=mode)


# --- decoded ids of whole searches ---------------------------------------------------------------


def _sampled(**options):
    return lambda model, source: dict(zip(("ids", "attention", "lengths"),
                                          sample_decode(model, source, MAX_LENGTH, **options)))


SEARCHES = {
    "greedy": lambda model, source: dict(zip(("ids", "attention", "lengths", "logprob"),
                                             greedy_decode_with_scores(model, source, MAX_LENGTH))),
    "beam1": lambda model, source: beam_search(model, source, MAX_LENGTH, beam_size=1),
    "beam4_penalties": lambda model, source: beam_search(model, source, MAX_LENGTH, beam_size=4, alpha=0.6, beta=0.4),
    "beam4_best": lambda model, source: beam_search(model, source, MAX_LENGTH, beam_size=4, alpha=0.6, nbest=False),
    "sample_top_k": _sampled(temperature=1.3, top_k=40, seed=6),
    "sample_top_p": _sampled(temperature=0.8, top_p=0.9, seed=7),
    "sample_top_k_top_p": _sampled(top_k=5, top_p=0.5, seed=8),
}
NARROW_SEARCHES = ("greedy", "beam1", "beam4_penalties", "beam4_best", "sample_top_k_top_p")
MODELS = [("bahdanau", NARROW, NARROW_SEARCHES), ("luong", NARROW, NARROW_SEARCHES),
          ("seq2seq", NARROW, NARROW_SEARCHES), ("transformer", NARROW, NARROW_SEARCHES),
          ("luong", WIDE, ("beam1", "beam4_penalties", "sample_top_k", "sample_top_p"))]
# The searches read a model through decode_step alone: one Transformer layer (its stacks, fast and
# reference, are compared step by step in tests/fast/test_transformer.py).
ONE_LAYER = {"transformer": {"num_layers": 1}}
IDS = ("ids", "lengths", "nbest_ids", "nbest_lengths")  # equal exactly; scores and attention within float32


def _model(name, vocab):
    """A tiny model whose distributions are far from uniform: an untrained model's are nearly flat
    (over 2,500 words its hypotheses' scores lie 1e-6 apart, where float32 rounding alone reorders
    them), so its output projection is scaled up, as training would sharpen it."""
    keras.utils.set_random_seed(0)
    model = zoo.models.create(name, source_vocab_size=SRC_VOCAB, target_vocab_size=vocab,
                              **{**TINY[name], **ONE_LAYER.get(name, {})})
    projection = model.ensure_built().output_projection
    projection.kernel.assign(projection.kernel * 30.0)
    return model


@pytest.mark.parametrize("name, vocab, searches", MODELS, ids=[f"{name}-{vocab}" for name, vocab, _ in MODELS])
def test_every_search_decodes_the_same_ids_fast_and_reference(name, vocab, searches):
    model = _model(name, vocab)
    for search in searches:
        decoded = {}
        for mode in kernels.MODES:
            with kernels.using(mode):
                decoded[mode] = {key: value.numpy() for key, value in SEARCHES[search](model, SOURCE).items()}
        reference, fast_out = decoded["reference"], decoded["fast"]
        assert sorted(fast_out) == sorted(reference)
        for key, want in reference.items():
            if key in IDS:
                np.testing.assert_array_equal(fast_out[key], want, err_msg=f"{search}: {key}")
            else:
                np.testing.assert_allclose(fast_out[key], want, rtol=1e-5, atol=1e-5, err_msg=f"{search}: {key}")


def test_the_wide_vocabulary_takes_the_fast_paths(monkeypatch):
    """The wide models above run the replacements' own paths, not their narrow fall-backs: the beam's
    ranking over 2,500 words (>= 16 slices of 64), top-k's slices, top-p's histograms (>= 2,048)."""
    assert WIDE >= 16 * 64 and WIDE >= 2048 and fast.slice_width(WIDE, 40) is not None
    widths = {}
    for reference in (sampling.top_k_rows, sampling.nucleus, best_continuations):
        replacement, gradient, backends = kernels.REPLACEMENTS[reference.key]

        def spy(values, *args, _name=reference.__name__, _replacement=replacement, **kwargs):
            widths.setdefault(_name, set()).add(values.shape[-1])
            return _replacement(values, *args, **kwargs)

        monkeypatch.setitem(kernels.REPLACEMENTS, reference.key, (spy, gradient, backends))
    keras.utils.set_random_seed(0)
    model = zoo.models.create("luong", source_vocab_size=SRC_VOCAB, target_vocab_size=WIDE, **TINY["luong"])
    with kernels.using("fast"):
        beam_search(model, SOURCE, 2, beam_size=4)
        sample_decode(model, SOURCE, 2, top_k=40, top_p=0.9)
    assert widths == {"best_continuations": {WIDE}, "top_k_rows": {WIDE}, "nucleus": {WIDE}}
