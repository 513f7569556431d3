"""Greedy, beam search and sampling: exactness, ordering, export, reproducibility."""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from models.test_models import SOURCE, SRC_VOCAB, TGT_VOCAB, TINY  # noqa: E402

import zoo.models  # noqa: E402
from zoo.decoding import beam_search, decode, greedy_decode, greedy_decode_with_scores, sample_decode  # noqa: E402
from zoo.decoding.sampling import filter_logits  # noqa: E402


def make(name, seed=0, **overrides):
    keras.utils.set_random_seed(seed)
    return zoo.models.create(name, source_vocab_size=SRC_VOCAB, target_vocab_size=TGT_VOCAB,
                             **{**TINY[name], **overrides})


@pytest.fixture(scope="module")
def built():
    """``make(name, **overrides)`` built once for this file's tests that only decode with it (a test
    that changes a model's attributes makes its own)."""
    models = {}

    def get(name, **overrides):
        key = (name, repr(sorted(overrides.items())))
        if key not in models:
            models[key] = make(name, **overrides).ensure_built()
        return models[key]

    return get


@pytest.mark.parametrize("name", zoo.models.names(task="seq2seq"))
def test_beam_size_one_is_greedy_exactly(name, built):
    model = built(name)
    ids, attention, lengths, logprob = [t.numpy() for t in greedy_decode_with_scores(model, SOURCE, 6)]
    beam = beam_search(model, SOURCE, 6, beam_size=1)
    np.testing.assert_array_equal(beam["ids"].numpy(), ids)
    np.testing.assert_array_equal(beam["lengths"].numpy(), lengths)
    np.testing.assert_allclose(beam["attention"].numpy(), attention, atol=1e-6)
    np.testing.assert_allclose(beam["score"].numpy(), logprob, atol=1e-5)


def test_beam_search_over_a_thousand_word_vocabulary_is_greedy_at_size_one_and_no_worse_at_four():
    """A target vocabulary of 1,500 words (the fast path ranks it through slices of its logits)."""
    keras.utils.set_random_seed(0)
    model = zoo.models.create("luong", source_vocab_size=SRC_VOCAB, target_vocab_size=1500, **TINY["luong"])
    ids, _, lengths, logprob = [t.numpy() for t in greedy_decode_with_scores(model, SOURCE, 6)]
    one = beam_search(model, SOURCE, 6, beam_size=1)
    np.testing.assert_array_equal(one["ids"].numpy(), ids)
    np.testing.assert_array_equal(one["lengths"].numpy(), lengths)
    np.testing.assert_allclose(one["score"].numpy(), logprob, atol=1e-5)
    four = beam_search(model, SOURCE, 6, beam_size=4)
    assert np.all(four["logprob"].numpy()[:, 0] >= logprob - 1e-5)
    # Each n-best entry's log-probability is the model's: teacher-forced, its tokens score the same.
    nbest, lengths4 = four["nbest_ids"].numpy(), four["nbest_lengths"].numpy()
    for b in range(3):
        for j in range(4):
            tokens = nbest[b, j, :lengths4[b, j]]
            target_in = np.concatenate([[2], tokens[:-1]])[None].astype("int32")
            logits = model((SOURCE[b:b + 1], target_in), training=False)
            logp = tf.nn.log_softmax(tf.cast(logits, tf.float32)).numpy()[0]
            forced = logp[np.arange(len(tokens)), tokens].sum()
            assert four["logprob"].numpy()[b, j] == pytest.approx(forced, abs=1e-4)


@pytest.fixture(scope="module")
def trained_dates_model():
    """A small model trained for a few hundred steps on dates (about 10 s), and its test split."""
    from zoo.data import load_task, make_dataset
    from zoo.data.task import encode

    keras.utils.set_random_seed(0)
    task = load_task({"name": "dates", "train_size": 3000, "val_size": 50, "test_size": 200, "seed": 0,
                      "bucket_boundaries": None})
    name = "bahdanau"
    model = zoo.models.create(name, source_vocab_size=task.source_tokenizer.vocab_size,
                              target_vocab_size=task.target_tokenizer.vocab_size, embed_dim=16, hidden_size=32)
    model.compile(optimizer=keras.optimizers.Adam(0.005),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0))
    model.fit(make_dataset(task, "train", 64, shuffle=True), epochs=2, verbose=0)
    source, _ = encode(task, "test")
    return model, source.to_tensor().numpy().astype("int32")


@pytest.fixture(scope="module")
def full_search(trained_dates_model):
    """``beam_search(model, source, 12, beam_size=4, alpha=, beta=)`` of the trained model, each
    searched once for the tests that read it."""
    model, source = trained_dates_model
    searches = {}

    def get(alpha=0.0, beta=0.0):
        if (alpha, beta) not in searches:
            searches[alpha, beta] = beam_search(model, source, 12, beam_size=4, alpha=alpha, beta=beta)
        return searches[alpha, beta]

    return get


def test_beam_finds_a_hypothesis_at_least_as_likely_as_greedy_on_every_test_sentence(trained_dates_model,
                                                                                      full_search):
    model, source = trained_dates_model
    _, _, _, greedy_logprob = greedy_decode_with_scores(model, source, 12)
    beam = full_search()  # beam_search(model, source, 12, beam_size=4)
    beam_logprob = beam["logprob"].numpy()[:, 0]
    assert np.all(beam_logprob >= greedy_logprob.numpy() - 1e-4)
    assert np.any(beam_logprob > greedy_logprob.numpy() + 1e-3), "beam never improved on greedy: is it searching?"


@pytest.mark.parametrize("alpha,beta,sooner", [(0.0, 0.0, True), (0.6, 0.0, True), (0.6, 0.4, False)])
def test_beam_search_for_the_best_alone_stops_sooner_with_the_same_best(trained_dates_model, full_search, alpha, beta,
                                                                        sooner):
    """nbest=False stops once each sentence's best finished hypothesis is out of every live one's
    reach, not its K-th: the best hypothesis (ids, attention, length, score) of the full search, the
    n-best list left out, fewer steps on the trained model's test sentences (with a coverage penalty,
    which the reach leaves out, both searches run to the end here)."""
    model, source = trained_dates_model
    full = full_search(alpha, beta)
    best = beam_search(model, source, 12, beam_size=4, alpha=alpha, beta=beta, nbest=False)
    assert sorted(best) == ["attention", "ids", "lengths", "score"]
    steps = best["ids"].shape[1]
    assert steps < full["ids"].shape[1] if sooner else steps <= full["ids"].shape[1], (steps, full["ids"].shape)
    np.testing.assert_array_equal(best["ids"].numpy(), full["ids"].numpy()[:, :steps])
    assert not full["ids"].numpy()[:, steps:].any()  # only padding after the best's last step
    np.testing.assert_array_equal(best["lengths"].numpy(), full["lengths"].numpy())
    np.testing.assert_allclose(best["score"].numpy(), full["score"].numpy(), atol=1e-6)
    np.testing.assert_allclose(best["attention"].numpy(), full["attention"].numpy()[:, :steps], atol=1e-6)
    # decode() (and so a SavedModel's translate) takes it, alpha and beta passed on (one case: the same
    # call for each)
    if alpha and beta:
        ids, _, _ = decode(model, source, 12, strategy="beam", beam_size=4, alpha=alpha, beta=beta)
        np.testing.assert_array_equal(ids.numpy(), best["ids"].numpy())


def test_nbest_lists_are_sorted_and_consistent_with_their_scores(built):
    model = built("bahdanau")
    out = beam_search(model, SOURCE, 6, beam_size=4, alpha=0.6)
    scores = out["nbest_scores"].numpy()
    assert scores.shape == (3, 4)
    assert np.all(np.diff(scores, axis=1) <= 1e-6)
    # Scores are the length-normalized log-probabilities of the listed hypotheses.
    lengths = out["nbest_lengths"].numpy()
    np.testing.assert_allclose(scores, out["logprob"].numpy() / ((5.0 + lengths) / 6.0) ** 0.6, rtol=1e-5)
    np.testing.assert_array_equal(out["ids"].numpy(), out["nbest_ids"].numpy()[:, 0])


def test_coverage_penalty_changes_scores_only_when_asked(built):
    model = built("bahdanau")
    plain = beam_search(model, SOURCE, 6, beam_size=3)["nbest_scores"].numpy()
    covered = beam_search(model, SOURCE, 6, beam_size=3, beta=0.5)["nbest_scores"].numpy()
    assert np.all(covered <= plain + 1e-6) and not np.allclose(covered, plain)


def test_sampling_is_reproducible_for_a_seed(built):
    model = built("bahdanau")
    a = sample_decode(model, SOURCE, 6, temperature=1.5, seed=7)[0].numpy()
    b = sample_decode(model, SOURCE, 6, temperature=1.5, seed=7)[0].numpy()
    others = [sample_decode(model, SOURCE, 6, temperature=1.5, seed=s)[0].numpy() for s in range(8, 12)]
    np.testing.assert_array_equal(a, b)
    assert any(o.shape != a.shape or np.any(o != a) for o in others)


def test_top_k_and_top_p_filter_the_right_tokens():
    logits = tf.math.log(tf.constant([[0.5, 0.3, 0.15, 0.05]]))
    kept = lambda f: np.isfinite(f.numpy()[0]).tolist()  # noqa: E731
    assert kept(filter_logits(logits, top_k=2)) == [True, True, False, False]
    assert kept(filter_logits(logits, top_p=0.7)) == [True, True, False, False]
    assert kept(filter_logits(logits, top_p=0.5)) == [True, False, False, False]
    assert kept(filter_logits(logits, top_p=0.1)) == [True, False, False, False]
    assert kept(filter_logits(logits)) == [True] * 4


def test_sampling_at_low_temperature_is_greedy(built):
    model = built("bahdanau")
    greedy = greedy_decode(model, SOURCE, 6)[0].numpy()
    cold = sample_decode(model, SOURCE, 6, temperature=1e-4, seed=1)[0].numpy()
    np.testing.assert_array_equal(cold, greedy)


def test_decode_dispatches_and_rejects_unknown_strategies(built):
    model = built("bahdanau")
    np.testing.assert_array_equal(decode(model, SOURCE, 6, strategy="beam", beam_size=1)[0].numpy(),
                                  greedy_decode(model, SOURCE, 6)[0].numpy())
    with pytest.raises(ValueError, match="Unknown decoding strategy 'viterbi'. Available: greedy, beam, sample"):
        decode(model, SOURCE, 6, strategy="viterbi")


def test_exported_beam_search_equals_the_in_memory_one(tmp_path):
    from zoo.data import load_task
    from zoo.export.translator import Translator

    task = load_task({"name": "dates", "train_size": 50, "val_size": 5, "test_size": 5, "seed": 0})
    keras.utils.set_random_seed(0)
    model = zoo.models.create("bahdanau", source_vocab_size=task.source_tokenizer.vocab_size,
                              target_vocab_size=task.target_tokenizer.vocab_size, **TINY["bahdanau"])
    translator = Translator(model, task.source_tokenizer, task.target_tokenizer, task.max_source_length,
                            task.max_target_length, decoding={"strategy": "beam", "beam_size": 3, "alpha": 0.6})
    inputs = tf.constant(["", "9 may 2018", "x" * 2000, "tue 2 jan 1979", "ǅ😀"])
    memory_out = translator.translate(inputs)
    memory_nbest = translator.translate_nbest(inputs)
    translator.save(str(tmp_path / "sm"))
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    loaded_out = loaded.translate(inputs)
    loaded_nbest = loaded.signatures["translate_nbest"](inputs=inputs)
    for key in ("text", "source_tokens", "target_tokens"):
        np.testing.assert_array_equal(memory_out[key].numpy(), loaded_out[key].numpy())
    np.testing.assert_allclose(memory_out["attention"].numpy(), loaded_out["attention"].numpy(), atol=1e-6)
    np.testing.assert_array_equal(memory_nbest["text"].numpy(), loaded_nbest["text"].numpy())
    np.testing.assert_allclose(memory_nbest["scores"].numpy(), loaded_nbest["scores"].numpy(), atol=1e-5)
    assert loaded_nbest["text"].shape == (5, 3)
    # The best of the n-best list is the translation.
    np.testing.assert_array_equal(loaded_nbest["text"].numpy()[:, 0], loaded_out["text"].numpy())


def test_beam_search_of_a_model_without_attention_carries_none_and_gives_the_same_results():
    """``seq2seq`` (``has_attention = False``): no attention rows move through the loop; the n-best
    lists, scores and the (all-zero) attention are those of the search that carries them."""
    model = make("seq2seq")
    lean = beam_search(model, SOURCE, 6, beam_size=4)
    model.has_attention = True  # as if it had attention: the rows (zeros) are carried
    carried = beam_search(model, SOURCE, 6, beam_size=4)
    del model.has_attention
    assert sorted(lean) == sorted(carried)
    for key in carried:
        np.testing.assert_array_equal(lean[key].numpy(), carried[key].numpy(), err_msg=key)
    assert lean["attention"].shape == carried["attention"].shape and not np.any(lean["attention"].numpy())


@pytest.mark.parametrize("name", ["bahdanau", "transformer"])
def test_beam_search_traces_for_one_sentence_of_static_shape(name, built):
    """A compiled search over a batch of exactly one sentence (static shape [1, T]), as the benchmark
    and a caller decoding one sentence trace it: the same hypotheses as the eager search (a one-layer
    Transformer: each layer's cache is shaped alike, one keeps the trace small)."""
    model = built(name, **({"num_layers": 1} if name == "transformer" else {}))
    source = tf.constant(SOURCE[:1])
    compiled = tf.function(lambda s: beam_search(model, s, 6, beam_size=4), autograph=False)(source)
    eager = beam_search(model, source, 6, beam_size=4)
    np.testing.assert_array_equal(compiled["nbest_ids"].numpy(), eager["nbest_ids"].numpy())
    np.testing.assert_allclose(compiled["nbest_scores"].numpy(), eager["nbest_scores"].numpy(), atol=1e-5)


@pytest.mark.parametrize("name, options", [
    ("luong", {"attention": "general"}), ("luong", {"attention": "dot", "input_feeding": True}),
    ("luong", {"attention": "concat"}), ("luong", {"attention": "local_p"}), ("luong", {"attention": "location"}),
    ("luong", {"attention": "multi_head", "cell": "gru", "num_layers": 2}),
    ("bahdanau", {}), ("bahdanau", {"attention": "multi_head", "deep_output": True}),
    ("bahdanau", {"attention": "general", "cell": "lstm", "num_layers": 2}),
])
def test_hypotheses_attend_as_their_sentences_queries_with_the_numbers_of_a_repeated_memory(name, options):
    """``hypotheses_memory``: the memory stays one row per sentence, and a step on K rows per sentence
    (beam search's hypotheses) gives what it gives over the memory repeated K times; so does the search."""
    model = zoo.models.create(name, source_vocab_size=SRC_VOCAB, target_vocab_size=TGT_VOCAB,
                              **{**TINY[name], **options})
    assert model.ensure_built().groups_hypotheses
    k, rows = 3, np.repeat(np.arange(len(SOURCE)), 3)
    sentences = model.encode(SOURCE)
    grouped = model.hypotheses_memory(sentences, k)
    assert grouped["memory"] is sentences["memory"] and grouped["hypotheses"] == k  # each source once
    repeated = tf.nest.map_structure(lambda x: tf.gather(x, rows), sentences)
    state = tf.nest.map_structure(lambda x: tf.gather(x, rows), model.initial_state(sentences, max_length=4))
    other = state
    for tokens in ([2] * 9, [5, 6, 7, 8, 9, 4, 5, 6, 7], [3, 4, 5, 9, 8, 7, 6, 5, 4]):  # rows drift apart
        tokens = tf.constant(tokens, tf.int32)
        logits, state, attention = model.decode_step(tokens, state, grouped)
        expected, other, expected_attention = model.decode_step(tokens, other, repeated)
        np.testing.assert_allclose(logits.numpy(), expected.numpy(), atol=1e-5)
        np.testing.assert_allclose(attention.numpy(), expected_attention.numpy(), atol=1e-6)
        assert attention.shape == (len(rows), SOURCE.shape[1])
        for got, want in zip(tf.nest.flatten(state), tf.nest.flatten(other)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)
    search = beam_search(model, SOURCE, 4, beam_size=4)  # steps 2-4 reorder the rows
    model.groups_hypotheses = False  # the repeated memory's search
    plain = beam_search(model, SOURCE, 4, beam_size=4)
    np.testing.assert_array_equal(search["nbest_ids"].numpy(), plain["nbest_ids"].numpy())
    np.testing.assert_allclose(search["nbest_scores"].numpy(), plain["nbest_scores"].numpy(), atol=1e-5)
    np.testing.assert_allclose(search["attention"].numpy(), plain["attention"].numpy(), atol=1e-6)


@pytest.mark.parametrize("name", ["luong", "bahdanau"])
def test_a_positional_attentions_hypotheses_keep_a_repeated_memory(name):
    """local-m places each row's query at that row's own target step: no grouping, every tensor repeated."""
    model = zoo.models.create(
        name, source_vocab_size=SRC_VOCAB, target_vocab_size=TGT_VOCAB,
        **{**TINY[name], "attention": "local_m", "attention_options": {"window_size": 2}})
    assert not model.ensure_built().groups_hypotheses
    memory = model.hypotheses_memory(model.encode(SOURCE), 4)
    assert "hypotheses" not in memory and memory["memory"].shape[0] == 4 * len(SOURCE)
    assert beam_search(model, SOURCE, 6, beam_size=4)["nbest_ids"].shape[:2] == (len(SOURCE), 4)


@pytest.mark.parametrize("name", ["seq2seq", "transformer"])
def test_full_recompute_greedy_is_greedy_for_one_sentence_in_a_graph(name):
    """zoo.decoding.full_recompute re-runs the decoder on the whole prefix each step (the bench's
    reference for cached decoding): the same ids as greedy_decode, also for a batch of one traced in a
    tf.function, where a recurrent decoder once failed the loop's shape check ((1, T) against (None, T)).
    A one-layer Transformer: each layer re-runs the same code on the prefix, one keeps the trace small."""
    import tensorflow as tf

    from zoo.decoding.full_recompute import full_recompute_greedy

    model = make(name, **({"num_layers": 1} if name == "transformer" else {}))
    one = SOURCE[:1]
    ids, lengths = tf.function(lambda s: full_recompute_greedy(model, s, 5))(one)
    expected, _, expected_lengths = greedy_decode(model, one, max_length=5)
    np.testing.assert_array_equal(lengths.numpy(), expected_lengths.numpy())
    for row, length in enumerate(lengths.numpy()):
        np.testing.assert_array_equal(ids.numpy()[row, :length], expected.numpy()[row, :length])
