"""``zoo.models.self_attention.transformer``'s attention options: positions as score biases (relative, t5,
alibi) or none, shared key-value heads (``num_kv_heads``), a sliding window (``attention_window``) and the
self-attention's choice (``attention``). For each, cached decoding (``decode_step``, the step's offset
reaching the positions) equals one-shot teacher forcing, greedy ids included; the cache holds only what
the option keeps; and ``train.py model=transformer <option> debug=smoke`` finishes (slow)."""

import keras
import numpy as np
import pytest

import zoo.attention
import zoo.models
from zoo.attention.base_attention import ATTENTIONS
from zoo.attention.multi_head_attention import MultiHeadAttention
from zoo.decoding import greedy_decode_with_scores

from conftest import compose, empty_store

SOURCE = np.array([[5, 6, 7, 8, 3, 0, 0], [9, 4, 3, 0, 0, 0, 0], [4, 5, 6, 7, 8, 9, 3]], dtype="int32")
TARGET_IN = np.array([[2, 5, 6, 7, 0, 0], [2, 8, 0, 0, 0, 0], [2, 9, 4, 5, 6, 7]], dtype="int32")
TINY = {"embed_dim": 8, "intermediate_dim": 16, "num_layers": 2, "num_heads": 2, "dropout": 0.0}
OPTIONS = [
    {"positions": "relative"},
    {"positions": "t5"},
    {"positions": "alibi"},
    {"positions": "none"},
    {"num_kv_heads": 1},
    {"attention_window": 2},
    {"positions": "alibi", "num_kv_heads": 1, "attention_window": 3, "norm_first": True},
]


def _ids(options):
    return "-".join(f"{k}={v}" for k, v in options.items())


def make(**options):
    keras.utils.set_random_seed(0)
    model = zoo.models.create("transformer", source_vocab_size=13, target_vocab_size=11, **{**TINY, **options})
    model.ensure_built()
    model.output_projection.kernel.assign(model.output_projection.kernel * 30.0)  # clear greedy choices
    return model


_MADE = {}


def made(**options):
    """``make(**options)``, built once per set of options for the checks that only read the model
    (outputs, caches, decoding, saving); a test that changes a model calls ``make``."""
    key = repr(sorted(options.items()))
    if key not in _MADE:
        _MADE[key] = make(**options)
    return _MADE[key]


@pytest.mark.parametrize("options", OPTIONS, ids=_ids)
def test_cached_decoding_equals_teacher_forcing(options):
    """Per-step logits of ``decode_step`` with the cache = the teacher-forced logits; greedy ids, fed back
    teacher-forced, are each position's argmax."""
    model = made(**options)
    full = keras.ops.convert_to_numpy(model.teacher_forced(SOURCE, TARGET_IN)[0])
    memory = model.encode(SOURCE)
    state = model.initial_state(memory, max_length=8)
    for t in range(TARGET_IN.shape[1]):
        logits, state, _ = model.decode_step(TARGET_IN[:, t], state, memory)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(logits), full[:, t], rtol=1e-5, atol=1e-5,
                                   err_msg=f"step {t}")
    ids, _, lengths, _ = greedy_decode_with_scores(model, SOURCE, 4)  # four steps: past the windows of 2 and 3
    ids = keras.ops.convert_to_numpy(ids)
    target_in = np.concatenate([np.full((3, 1), 2, "int32"), ids[:, :-1]], axis=1)
    again = keras.ops.convert_to_numpy(model.teacher_forced(SOURCE, target_in)[0]).argmax(-1)
    for row, length in enumerate(keras.ops.convert_to_numpy(lengths)):
        np.testing.assert_array_equal(ids[row, :length], again[row, :length])


def test_beam_search_reorders_every_cache_part():
    """The flat state (windowed, shared-head caches) goes through beam search: size 1 is greedy exactly,
    size 3 finds a sequence no less likely."""
    from zoo.decoding import beam_search

    model = made(**OPTIONS[-1])
    ids, _, lengths, logprob = [keras.ops.convert_to_numpy(t) for t in greedy_decode_with_scores(model, SOURCE, 6)]
    one = beam_search(model, SOURCE, 6, beam_size=1)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(one["ids"]), ids)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(one["score"]), logprob, atol=1e-5)
    three = beam_search(model, SOURCE, 6, beam_size=3)
    assert np.all(keras.ops.convert_to_numpy(three["logprob"])[:, 0] >= logprob - 1e-5)


@pytest.mark.parametrize("options, shape", [({}, (3, 2, 8, 4)), ({"num_kv_heads": 1}, (3, 1, 8, 4)),
                                            ({"attention_window": 3}, (3, 2, 3, 4))], ids=["full", "mqa", "window"])
def test_the_cache_holds_the_shared_heads_and_the_window_only(options, shape):
    model = made(**options)
    state = model.initial_state(model.encode(SOURCE), max_length=8)
    assert len(state) == 1 + 2 * TINY["num_layers"]
    assert {tuple(part.shape) for part in state[1:]} == {shape}
    assert model.decoding_cache_bytes(8) == 2 * 2 * 4 * shape[1] * shape[2] * 4  # N layers, keys and values, float32


def test_positions_none_and_the_score_biases_add_nothing_to_the_embeddings():
    for positions in ("relative", "t5", "alibi", "none"):
        model = made(positions=positions)
        assert model.source_positions is None and model.target_positions is None
        assert all(layer.rope is None for layer in model.encoder_layers)
        biases = [layer.score_bias for layer in [*model.encoder_layers, *model.decoder_layers]]
        assert (biases == [None] * 4) == (positions == "none")


def test_t5_shares_one_table_per_stack_and_relative_learns_one_per_layer():
    t5 = made(positions="t5")
    assert t5.encoder_layers[0].score_bias is t5.encoder_layers[1].score_bias is t5.encoder_position_bias
    assert t5.encoder_position_bias.bidirectional and not t5.decoder_position_bias.bidirectional
    assert sum("position_bias" in v.path for v in t5.weights) == 2  # [buckets, H] each, counted once
    relative = made(positions="relative")
    assert relative.encoder_layers[0].score_bias is not relative.encoder_layers[1].score_bias
    assert sum("relative_positions" in v.path for v in relative.weights) == 2 * 2 * 2  # a^K, a^V per layer


def test_the_attention_option_chooses_the_self_attention_and_the_cross_attention_stays_multi_head():
    """A registered subclass of ``MultiHeadAttention`` with its options: used for self-attention only."""
    @zoo.attention.register_attention("throwaway_self")
    class Throwaway(MultiHeadAttention):
        pass

    try:
        model = make(attention="throwaway_self", attention_options={"scoring": "dot", "num_heads": 7})
        for layer in [*model.encoder_layers, *model.decoder_layers]:
            assert type(layer.self_attention) is Throwaway
            assert layer.self_attention.scoring == "dot" and layer.self_attention.num_heads == 2  # the model's
        assert all(type(layer.cross_attention) is MultiHeadAttention for layer in model.decoder_layers)
        clone = type(model).from_config(model.get_config())
        assert clone.attention == "throwaway_self" and clone.attention_options == {"scoring": "dot", "num_heads": 7}
    finally:
        ATTENTIONS.unregister("throwaway_self")


@pytest.mark.parametrize("options", [OPTIONS[0], OPTIONS[-1]], ids=_ids)
def test_keras_file_round_trip(options, tmp_path):
    model = made(**options)
    want = keras.ops.convert_to_numpy(model((SOURCE, TARGET_IN)))
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded((SOURCE, TARGET_IN))), want, rtol=1e-6, atol=1e-6)


SMOKE = [["model.positions=relative", "model.num_kv_heads=1", "model.attention_window=4"]]


@pytest.mark.slow
def test_train_smoke_runs_finish_with_the_options(tmp_path):
    """``python train.py model=transformer <options> debug=smoke``, in process: a score bias with a value
    term, shared key-value heads and a window in one run (each option alone decodes and trains above and in
    tests/fast/test_transformer.py; one run keeps this file's time down)."""
    from zoo.training import train

    uri = empty_store(tmp_path)
    for options in SMOKE:
        result = train(compose(["model=transformer", *options, "model.num_layers=1", "trainer.epochs=1",
                                "debug=smoke", f"tracking.uri={uri}",
                                f"trainer.checkpoint_dir={tmp_path / 'ckpt'}", "tracking.export=false",
                                "tracking.attention_plots=0", "tracking.predictions=0",
                                "data.val_size=8", "data.test_size=8"]))  # one validation batch: one eval trace
        assert result["run_id"], options
    import mlflow

    # The decoder's cache, logged with the run: N = 1 layer x (keys, values) x H_kv = 1 x W = 4 slots x
    # d_k = 8 / 4 x 4 bytes, whatever the target length (without the window: 4 x L slots of 4 heads).
    metrics = mlflow.MlflowClient(uri).get_run(result["run_id"]).data.metrics
    assert metrics["decoding_cache_bytes"] == 1 * 2 * 1 * 4 * 2 * 4
