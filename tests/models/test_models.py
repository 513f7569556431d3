"""Every registered model, at tiny sizes: shapes, no NaN, learning, .keras round trip, decoding."""

import inspect
from pathlib import Path

import numpy as np
import pytest
import yaml

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

import zoo.models  # noqa: E402
from zoo.config import compose_train, model_kwargs  # noqa: E402
from zoo.decoding import greedy_decode  # noqa: E402

# One line per registered model: the smallest sizes that exercise it.
TINY = {
    "bahdanau": {"embed_dim": 8, "hidden_size": 12},
    "luong": {"embed_dim": 8, "hidden_size": 12},
    "seq2seq": {"embed_dim": 8, "hidden_size": 12},
    "transformer": {"embed_dim": 8, "intermediate_dim": 16, "num_layers": 2, "num_heads": 2},
}
# The encoder-decoders (other registered models, e.g. regression ones, have their own tests).
try:
    SEQ2SEQ = zoo.models.names(task="seq2seq")
except TypeError:  # a registry without tasks: every model is an encoder-decoder
    SEQ2SEQ = zoo.models.names()
SRC_VOCAB, TGT_VOCAB = 13, 11
SOURCE = np.array([[5, 6, 7, 8, 3, 0, 0], [9, 4, 3, 0, 0, 0, 0], [4, 5, 6, 7, 8, 9, 3]], dtype="int32")
TARGET_IN = np.array([[2, 5, 6, 7, 0], [2, 8, 0, 0, 0], [2, 9, 4, 5, 6]], dtype="int32")
TARGET_OUT = np.array([[5, 6, 7, 3, 0], [8, 3, 0, 0, 0], [9, 4, 5, 6, 3]], dtype="int32")


def test_every_registered_model_has_a_config_and_a_tiny_setting():
    from zoo.config import options

    assert zoo.models.names() == options("model")
    assert sorted(TINY) == SEQ2SEQ


CONF_DIR = Path(__file__).resolve().parents[2] / "conf" / "model"
DATA_SIZES = {"source_vocab_size", "target_vocab_size"}  # from the data, never in a config
# Constructor arguments a config does not set: a kernel regression run trains both kinds.
NOT_IN_CONFIG = {"nadaraya_watson": {"parametric"}}


# Story-QA models (tests/models/test_readers.py) take the data's vocabulary and memory sizes.
QA_DATA_SIZES = {"vocab_size", "memory_size"}


def data_sizes(name):
    if name in SEQ2SEQ:
        return DATA_SIZES
    if zoo.models.MODELS.meta(name).get("task") == "qa":
        return QA_DATA_SIZES
    if zoo.models.MODELS.meta(name).get("task") == "classify":  # tests/models/test_transformer_classifier.py
        return {"vocab_size", "num_classes"}
    if zoo.models.MODELS.meta(name).get("task") == "image":  # tests/models/test_vision.py
        return {"target_vocab_size"}
    if zoo.models.MODELS.meta(name).get("task") == "speech":  # tests/models/test_audio.py
        return {"target_vocab_size", "num_mels"}
    return set()


def model_class(name):
    sizes = {"source_vocab_size": SRC_VOCAB, "target_vocab_size": TGT_VOCAB} if name in SEQ2SEQ else \
        {k: 7 for k in data_sizes(name)}
    return type(zoo.models.create(name, **sizes))


@pytest.mark.parametrize("name", zoo.models.names())
def test_config_defaults_are_the_constructor_defaults(name):
    # The config as train() hands it to zoo.models.create: conf/model/<name>.yaml as Hydra composes it.
    config = compose_train([f"model={name}"]).model
    assert config.name == name
    kwargs = model_kwargs(config)
    params = inspect.signature(model_class(name).__init__).parameters
    defaults = {k: p.default for k, p in params.items()
                if p.default is not p.empty and k not in NOT_IN_CONFIG.get(name, ())}
    required = {k for k, p in params.items() if k != "self" and p.default is p.empty and p.kind == p.POSITIONAL_OR_KEYWORD}
    assert required == data_sizes(name)
    # attention_options: None in Python (the layer's own defaults); in a config, nothing or exactly
    # the layer's defaults, conf/attention/<attention>.yaml.
    if "attention_options" in defaults:
        assert defaults.pop("attention_options") is None
        options = kwargs.pop("attention_options", None) or {}
        with open(CONF_DIR.parent / "attention" / f"{kwargs['attention']}.yaml") as f:
            layer_defaults = {k: v for k, v in yaml.safe_load(f).items() if k not in ("name", "kind")}
        assert options in ({}, layer_defaults)
    assert kwargs == defaults


def make(name, **overrides):
    keras.utils.set_random_seed(0)
    return zoo.models.create(name, source_vocab_size=SRC_VOCAB, target_vocab_size=TGT_VOCAB,
                             **{**TINY[name], **overrides})


@pytest.fixture(scope="module")
def built():
    """Each encoder-decoder at its tiny defaults (``make(name)``), built once for this file's read-only checks: ``built(name)``."""
    from conftest import built_once

    return built_once(make)


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_shapes_and_finite_outputs(name, built):
    model = built(name)
    logits = model((SOURCE, TARGET_IN))
    assert tuple(logits.shape) == (3, 5, TGT_VOCAB)
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(logits)))


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_attention_weights_have_the_documented_shape_and_mask(name, built):
    model = built(name)
    weights = keras.ops.convert_to_numpy(model.attention_weights((SOURCE, TARGET_IN)))
    assert weights.shape == (3, 5, 7)  # [B, T_out, T_in]
    pad = SOURCE == 0
    assert np.all(weights[np.broadcast_to(pad[:, None, :], weights.shape)] == 0.0)
    if not getattr(model, "has_attention", True):  # a model without attention says so: its weights are all 0
        assert np.all(weights == 0.0)
    else:
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_training_steps_lower_the_loss(name):
    # One Transformer layer: each runs the same code (two stacked: the built model's tests above and below).
    model = make(name, **({"num_layers": 1} if name == "transformer" else {}))
    # Eagerly: two steps cost less than tracing Keras' train function (the graph step is fit.py's, tested there).
    # Each step returns the loss before its update: ``last`` is the loss after the first update.
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0), run_eagerly=True)
    first = model.train_on_batch((SOURCE, TARGET_IN), TARGET_OUT)
    last = model.train_on_batch((SOURCE, TARGET_IN), TARGET_OUT)
    assert np.isfinite(last) and last < first


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_keras_file_round_trip_gives_identical_outputs(name, tmp_path, built):
    model = built(name)
    before = keras.ops.convert_to_numpy(model((SOURCE, TARGET_IN)))
    path = tmp_path / f"{name}.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    after = keras.ops.convert_to_numpy(loaded((SOURCE, TARGET_IN)))
    np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_greedy_decoding_agrees_with_teacher_forcing_on_its_own_output(name, built):
    model = built(name)
    ids, attention, lengths = greedy_decode(model, SOURCE, max_length=6)
    ids, attention, lengths = ids.numpy(), attention.numpy(), lengths.numpy()
    assert ids.shape[0] == 3 and ids.shape[1] <= 6 and attention.shape == (3, ids.shape[1], 7)
    # Feeding the greedy tokens back with teacher forcing must reproduce them step by step.
    target_in = np.concatenate([np.full((3, 1), 2, "int32"), ids[:, :-1]], axis=1)
    logits = keras.ops.convert_to_numpy(model((SOURCE, target_in)))
    for row in range(3):
        n = lengths[row]
        assert n >= 1
        np.testing.assert_array_equal(logits[row, :n].argmax(-1), ids[row, :n])
        assert np.all(ids[row, n:] == 0) and np.all(attention[row, n:] == 0)


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_features_projected_position_by_position_are_the_logits(name, built):
    """``call(..., return_features=True)`` then ``output_logits``: the logits of ``call``; one
    step's ``decode_features`` then ``output_logits``: ``decode_step``'s (the training step projects
    only the real tokens' rows)."""
    model = built(name)
    assert model.supports_features
    logits = keras.ops.convert_to_numpy(model((SOURCE, TARGET_IN)))
    all_features, _ = model.teacher_forced_features(SOURCE, TARGET_IN)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model.output_logits(all_features)), logits, atol=1e-6)
    features = model((SOURCE, TARGET_IN), return_features=True)  # the training step's: padding may be skipped
    assert tuple(features.shape) == (3, 5, model.feature_size)
    real = TARGET_IN != 0
    np.testing.assert_allclose(keras.ops.convert_to_numpy(features)[real],
                               keras.ops.convert_to_numpy(all_features)[real], atol=1e-5)
    rows = keras.ops.convert_to_numpy(features)[TARGET_OUT != 0]  # [N, F]: real tokens only
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model.output_logits(rows)), logits[TARGET_OUT != 0],
                               atol=1e-5)
    memory = model.encode(SOURCE)
    state = model.initial_state(memory, max_length=5)
    step_logits, _, step_attention = model.decode_step(TARGET_IN[:, 0], state, memory)
    step_features, _, feature_attention = model.decode_features(TARGET_IN[:, 0], state, memory)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(step_logits),
                                  keras.ops.convert_to_numpy(model.output_logits(step_features)))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(step_attention),
                                  keras.ops.convert_to_numpy(feature_attention))


@pytest.mark.parametrize("name", ["bahdanau", "luong"])
def test_step_loop_of_features_is_the_same_as_scan_and_bounded(name):
    """The teacher-forced step loop (``bahdanau``; ``luong`` with input feeding) carries features and
    projects once after it; ``time_loop="bounded"`` (the XLA step's) gives the same numbers."""
    model = make(name, **({"input_feeding": True} if name == "luong" else {}))
    scan_logits, scan_attention = model.teacher_forced(SOURCE, TARGET_IN)
    memory = model.encode(SOURCE)
    state = model.initial_state(memory, max_length=5)
    for t in range(TARGET_IN.shape[1]):
        logits, state, _ = model.decode_step(TARGET_IN[:, t], state, memory)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(logits),
                                   keras.ops.convert_to_numpy(scan_logits)[:, t], atol=1e-5)
    model.time_loop = "bounded"
    bounded_logits, bounded_attention = model.teacher_forced(SOURCE, TARGET_IN)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(bounded_logits), keras.ops.convert_to_numpy(scan_logits),
                               atol=1e-6)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(bounded_attention),
                               keras.ops.convert_to_numpy(scan_attention), atol=1e-6)


def test_a_model_with_only_decode_step_still_trains_and_decodes_by_its_steps(built):
    """The optional feature split: a subclass that writes ``decode_step`` only (as the interface
    always allowed) gets the step loop over its logits and no ``return_features``."""
    from zoo.models.encoder_decoder import Seq2SeqModel

    base = built("seq2seq")  # read only

    class StepOnly(Seq2SeqModel):
        target_vocab_size = TGT_VOCAB

        def encode(self, source, training=None):
            return base.encode(source, training=training)

        def initial_state(self, memory, max_length=None):
            return base.initial_state(memory, max_length)

        def decode_step(self, token, state, memory, training=None):
            features, state, attention = base.decode_features(token, state, memory, training=training)
            return base.output_logits(features), state, attention

    model = StepOnly()
    assert not model.supports_features and base.supports_features
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model((SOURCE, TARGET_IN))),
                               keras.ops.convert_to_numpy(base((SOURCE, TARGET_IN))), atol=1e-5)
    with pytest.raises(NotImplementedError):
        model.teacher_forced_features(SOURCE, TARGET_IN)


# -- model options ------------------------------------------------------------------------------
# Each variant a distinct cell, attention or decoder layout (bahdanau's default, deep_output=True, is
# test_keras_file_round_trip_gives_identical_outputs[bahdanau] and test_greedy_decoding_...[bahdanau] above,
# and beam search in tests/decoding/test_decoding.py; one stacked-LSTM bahdanau carries dropout and the
# general score together; the Transformer's options at one layer: two stacked layers round trip and decode
# in test_keras_file_round_trip_gives_identical_outputs[transformer] and test_greedy_decoding_...[transformer]).
VARIANTS = [
    ("bahdanau", {"cell": "lstm", "num_layers": 2, "dropout": 0.1, "attention": "general"}),
    ("bahdanau", {"attention": "local_m", "attention_options": {"window_size": 2}}),
    ("bahdanau", {"attention": "multi_head"}),
    ("luong", {"cell": "gru", "num_layers": 2, "bidirectional": False, "input_feeding": False}),
    ("luong", {"attention": "local_m", "attention_options": {"window_size": 2}, "input_feeding": True}),
    ("bahdanau", {"attention": "location_aware", "attention_options": {"units": 6, "filters": 2, "kernel_size": 3}}),
    ("luong", {"attention": "location_aware", "attention_options": {"units": 6, "filters": 2, "kernel_size": 3},
               "input_feeding": True}),
    ("seq2seq", {"cell": "lstm", "num_layers": 2, "bidirectional": True, "reverse_source": True}),
    ("transformer", {"positions": "sinusoidal", "norm_first": True, "activation": "gelu", "num_layers": 1}),
    ("transformer", {"positions": "learned", "tie_output": True, "num_layers": 1}),
]


def _variant_id(value):
    if isinstance(value, str):
        return value
    return "-".join(f"{k}={v}" for k, v in value.items() if not isinstance(v, dict))


@pytest.mark.parametrize("name,options", VARIANTS, ids=_variant_id)
def test_model_options_round_trip_and_decode_consistently(name, options, tmp_path):
    model = make(name, **options)
    before = keras.ops.convert_to_numpy(model((SOURCE, TARGET_IN)))
    assert before.shape == (3, 5, TGT_VOCAB) and np.all(np.isfinite(before))
    path = tmp_path / f"{name}.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.get_config() == model.get_config()
    np.testing.assert_array_equal(before, keras.ops.convert_to_numpy(loaded((SOURCE, TARGET_IN))))
    ids, _, lengths = greedy_decode(model, SOURCE, max_length=4)  # four steps carry the state three times
    ids, lengths = ids.numpy(), lengths.numpy()
    target_in = np.concatenate([np.full((3, 1), 2, "int32"), ids[:, :-1]], axis=1)
    logits = keras.ops.convert_to_numpy(model((SOURCE, target_in)))
    for row in range(3):
        np.testing.assert_array_equal(logits[row, :lengths[row]].argmax(-1), ids[row, :lengths[row]])
    # Beam search reorders the decoder state along the batch axis: every state tensor is batch-major.
    from zoo.decoding import beam_search

    beams = beam_search(model, SOURCE, max_length=3, beam_size=2)  # the second and third steps reorder
    assert beams["nbest_ids"].shape[:2] == (3, 2)


def test_bahdanau_defaults_are_unchanged_by_the_new_options(built):
    default = built("bahdanau")  # weights are drawn at build time (make, then ensure_built)
    explicit = make("bahdanau", cell="gru", num_layers=1).ensure_built()
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(default((SOURCE, TARGET_IN))),
                                  keras.ops.convert_to_numpy(explicit((SOURCE, TARGET_IN))))
    assert [w.path for w in default.weights] == [w.path for w in explicit.weights]
    assert len(default.initial_state(default.encode(SOURCE), 5)) == 1  # (s_0,), as before


def test_bahdanau_deep_output_is_a_maxout_of_state_previous_word_and_context():
    model = make("bahdanau", deep_output=True, dropout=0.0).ensure_built()
    memory = model.encode(SOURCE)
    token = np.array([2, 2, 2], "int32")
    state = model.initial_state(memory, 5)
    logits, new_state, _ = model.decode_step(token, state, memory)
    # The same step by hand: s_1 from the GRU, context from the attention, then the readout.
    query = keras.ops.expand_dims(state[0], 1)
    mask = keras.ops.expand_dims(memory["memory_mask"], 1)
    context = keras.ops.squeeze(model.attention.attend(query, memory["memory"], memory["keys"], mask=mask), 1)
    embedded = model.target_embedding(token)
    pre = keras.ops.convert_to_numpy(model.readout(keras.ops.concatenate([new_state[0], embedded, context], -1)))
    t = pre.reshape(3, TINY["bahdanau"]["hidden_size"], 2).max(-1)
    expected = keras.ops.convert_to_numpy(model.output_projection(t))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(logits), expected, rtol=1e-5, atol=1e-6)


def test_bahdanau_reads_out_after_the_time_loop():
    """With the deep output the step's features are ``[s_i; e(y_{i-1}); c_i]`` and ``output_logits``
    applies the readout, the maxout, the output dropout and ``W_o``: teacher forcing runs the readout
    once after the loop (the training step, on the real rows only)."""
    hidden, embed = TINY["bahdanau"]["hidden_size"], TINY["bahdanau"]["embed_dim"]
    model = make("bahdanau", deep_output=True, dropout=0.5).ensure_built()
    features = keras.ops.convert_to_numpy(model((SOURCE, TARGET_IN), return_features=True))
    assert features.shape == (3, 5, model.feature_size) and model.feature_size == hidden + embed + model.memory_dim
    np.testing.assert_allclose(features[..., hidden:hidden + embed],
                               keras.ops.convert_to_numpy(model.target_embedding(TARGET_IN)), rtol=1e-6)
    logits = keras.ops.convert_to_numpy(model((SOURCE, TARGET_IN)))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model.output_logits(features)), logits, rtol=1e-5,
                               atol=1e-6)
    dropped = keras.ops.convert_to_numpy(model.output_logits(features, training=True))  # dropout 0.5 on t_i
    assert dropped.shape == logits.shape and not np.allclose(dropped, logits)
    assert make("bahdanau", deep_output=False).feature_size == hidden  # d2l's readout: W_o s_i


def test_bahdanau_configs_saved_before_deep_output_load_without_it():
    model = make("bahdanau", deep_output=False).ensure_built()
    config = model.get_config()
    del config["deep_output"]  # as written by the code before the option existed
    loaded = type(model).from_config(config)
    assert loaded.deep_output is False and make("bahdanau").deep_output is True
    loaded.ensure_built().set_weights(model.get_weights())
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model((SOURCE, TARGET_IN))),
                                  keras.ops.convert_to_numpy(loaded((SOURCE, TARGET_IN))))


def test_transformer_configs_saved_with_hidden_size_load_as_intermediate_dim(built):
    model = built("transformer")
    config = model.get_config()
    config["hidden_size"] = config.pop("intermediate_dim")  # the name before the rename
    loaded = type(model).from_config(config)
    assert loaded.intermediate_dim == 16 and loaded.get_config() == model.get_config()
    with pytest.raises(ValueError, match="no argument `hidden_size`: the feed-forward size is `intermediate_dim`"):
        make("transformer", hidden_size=16)


@pytest.mark.parametrize("name", ["bahdanau", "luong", "seq2seq"])
def test_hidden_size_is_the_decoder_rnn_width_in_every_rnn_model(name, built):
    # Same meaning everywhere; how the encoder is sized from it is each model's (see its docstring).
    # (bahdanau's and luong's encoders are bidirectional by default: their tiny defaults, built once.)
    model = make(name, bidirectional=True).ensure_built() if name == "seq2seq" else built(name)
    assert model.bidirectional
    memory = model.encode(SOURCE)
    state = model.initial_state(memory, 5)
    _, new_state, _ = model.decode_step(np.array([2, 2, 2], "int32"), state, memory)
    widths = {int(s.shape[-1]) for s in new_state if len(s.shape) == 2}
    assert widths == {TINY[name]["hidden_size"]}
    per_direction = {"bahdanau": 12, "luong": 6, "seq2seq": 6}[name]
    assert model.encoder_units == per_direction and model.memory_dim == 2 * per_direction


LUONG_ATTENTIONS = ["general", "dot", "concat", "local_m", "local_p", "location", "multi_head", "location_aware"]


@pytest.mark.parametrize("attention", LUONG_ATTENTIONS)
def test_luong_parallel_teacher_forcing_equals_the_step_by_step_scan(attention):
    from zoo.models.encoder_decoder import Seq2SeqModel

    # The decoder RNN runs over the whole target before the attention: the cell and depth meet every
    # score the same way, so the attentions alternate between a one-layer LSTM and a two-layer GRU
    # (four of each) rather than each running both.
    cell, layers = (("lstm", 1), ("gru", 2))[LUONG_ATTENTIONS.index(attention) % 2]
    model = make("luong", attention=attention, input_feeding=False, cell=cell, num_layers=layers)
    parallel_logits, parallel_attention = model.teacher_forced(SOURCE, TARGET_IN)
    scan_features, scan_attention = Seq2SeqModel.teacher_forced_features(model, SOURCE, TARGET_IN)
    scan_logits = model.output_logits(scan_features)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(parallel_logits),
                               keras.ops.convert_to_numpy(scan_logits), atol=1e-5)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(parallel_attention),
                               keras.ops.convert_to_numpy(scan_attention), atol=1e-5)


def test_luong_local_m_windows_follow_the_target_step():
    model = make("luong", attention="local_m", attention_options={"window_size": 1}, input_feeding=False)
    weights = keras.ops.convert_to_numpy(model.attention_weights((SOURCE, TARGET_IN)))
    source = np.arange(SOURCE.shape[1])
    for t in range(TARGET_IN.shape[1]):
        assert np.all(weights[:, t, np.abs(source - t) > 1] == 0.0)


@pytest.mark.parametrize("attention,input_feeding", [("dot", False), ("general", True), ("concat", False),
                                                     ("local_p", True)])
def test_luong_trains_a_step_with_each_attention(attention, input_feeding):
    model = make("luong", attention=attention, input_feeding=input_feeding)
    # Eagerly, as test_training_steps_lower_the_loss: two steps cost less than tracing Keras' train function.
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0), run_eagerly=True)
    first = model.train_on_batch((SOURCE, TARGET_IN), TARGET_OUT)
    second = model.train_on_batch((SOURCE, TARGET_IN), TARGET_OUT)
    assert np.isfinite(first) and np.isfinite(second) and second < first


@pytest.mark.parametrize("options", [{"positions": "rotary"}, {"positions": "sinusoidal", "norm_first": True},
                                     {"positions": "learned", "tie_output": True}])
def test_transformer_cached_decoding_equals_full_recompute_at_each_step(options):
    model = make("transformer", **options)
    full_logits, full_attention = model.teacher_forced(SOURCE, TARGET_IN)
    full_logits = keras.ops.convert_to_numpy(full_logits)
    full_attention = keras.ops.convert_to_numpy(full_attention)
    memory = model.encode(SOURCE)
    state = model.initial_state(memory, max_length=8)  # a longer cache than the target
    for t in range(TARGET_IN.shape[1]):
        logits, state, attention = model.decode_step(TARGET_IN[:, t], state, memory)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(logits), full_logits[:, t], atol=1e-5)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(attention), full_attention[:, t], atol=1e-5)
    assert tuple(state[1].shape) == (3, 2, 8, 4)  # keys [B, H, max_length, d_k], the same at every step
    assert tuple(state[2].shape) == (3, 2, 8, 4)  # values [B, H, max_length, d_k]


@pytest.mark.parametrize("options", [{"positions": "rotary"}, {"positions": "sinusoidal", "norm_first": True},
                                     {"positions": "learned", "tie_output": True}])
def test_transformer_training_features_skip_the_padding(options):
    """The training step's features (``return_features=True``): the encoder's and decoder's
    position-wise work (and the self-attention projections) run on the real positions' rows only
    (``SOURCE`` and ``TARGET_IN`` both have padding); the same values there, 0 at padding, and the
    same gradients."""
    import tensorflow as tf

    model = make("transformer", num_layers=2, dropout=0.0, **options)
    real = TARGET_IN != 0
    grads = []
    for skip in (False, True):
        with tf.GradientTape() as tape:
            if skip:
                features = model((SOURCE, TARGET_IN), return_features=True)
            else:
                features, _ = model.teacher_forced_features(SOURCE, TARGET_IN)
            total = tf.reduce_sum(tf.boolean_mask(features, real) ** 2)
        grads.append(tape.gradient(total, model.trainable_variables))
        if skip:
            assert np.all(keras.ops.convert_to_numpy(features)[~real] == 0.0)
    # float32 sums in another order: the absolute slack scales with the model's largest gradient (a bias
    # whose exact gradient is 0, e.g. the keys', holds rounding noise of that size)
    scale = max(float(np.abs(tf.convert_to_tensor(g).numpy()).max()) for g in grads[0] if g is not None)
    for skipped, full in zip(*grads):
        assert (skipped is None) == (full is None)  # None: the output projection, after the features
        if full is not None:
            np.testing.assert_allclose(tf.convert_to_tensor(skipped).numpy(), tf.convert_to_tensor(full).numpy(),
                                       rtol=1e-4, atol=max(1e-5, 2e-6 * scale))


def test_transformer_training_features_of_an_all_padding_source():
    """An all-padding source batch (no real position to gather padding slots from) keeps its first
    position as a row: finite features and gradients, the same as ``teacher_forced_features``' at
    the real target positions."""
    import tensorflow as tf

    model = make("transformer", num_layers=1, dropout=0.0, positions="sinusoidal")
    source = np.zeros_like(SOURCE)
    real = TARGET_IN != 0
    with tf.GradientTape() as tape:
        features = model((source, TARGET_IN), return_features=True)
        total = tf.reduce_sum(tf.boolean_mask(features, real) ** 2)
    grads = [g for g in tape.gradient(total, model.trainable_variables) if g is not None]
    full, _ = model.teacher_forced_features(source, TARGET_IN)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(features)[real], keras.ops.convert_to_numpy(full)[real],
                               atol=1e-5)
    assert grads and all(np.all(np.isfinite(tf.convert_to_tensor(g).numpy())) for g in grads)


def test_transformer_attention_maps_have_one_entry_per_layer_and_head():
    model = make("transformer", num_layers=2, num_heads=2)
    maps = model.attention_maps((SOURCE, TARGET_IN))
    assert sorted(maps) == ["cross", "encoder", "self"]
    shapes = {key: [tuple(m.shape) for m in value] for key, value in maps.items()}
    assert shapes == {"encoder": [(3, 2, 7, 7)] * 2, "self": [(3, 2, 5, 5)] * 2, "cross": [(3, 2, 5, 7)] * 2}
    self_weights = keras.ops.convert_to_numpy(maps["self"][0])
    assert np.all(self_weights[..., np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] == 0.0)  # causal
    cross = keras.ops.convert_to_numpy(maps["cross"][-1])
    np.testing.assert_allclose(cross.mean(1), keras.ops.convert_to_numpy(model.attention_weights((SOURCE, TARGET_IN))),
                               atol=1e-6)
    assert np.all(cross[np.broadcast_to((SOURCE == 0)[:, None, None, :], cross.shape)] == 0.0)


def test_transformer_shares_embeddings_only_between_equal_vocabularies():
    keras.utils.set_random_seed(0)
    shared = zoo.models.create("transformer", source_vocab_size=SRC_VOCAB, target_vocab_size=SRC_VOCAB,
                               share_embeddings=True, tie_output=True, **TINY["transformer"])
    separate = zoo.models.create("transformer", source_vocab_size=SRC_VOCAB, target_vocab_size=SRC_VOCAB,
                                 **TINY["transformer"])
    shared.ensure_built(), separate.ensure_built()
    # no target embedding [V, D], no output kernel [D, V]; the output bias stays
    assert shared.count_params() == separate.count_params() - SRC_VOCAB * 8 - 8 * SRC_VOCAB
    with pytest.raises(ValueError, match="share_embeddings.*source_vocab_size=13, target_vocab_size=11"):
        make("transformer", share_embeddings=True)


def test_seq2seq_reverse_source_reverses_within_the_length():
    from zoo.models.recurrent.rnn import reverse_padded

    lengths = (SOURCE != 0).sum(1)
    reversed_ = keras.ops.convert_to_numpy(reverse_padded(SOURCE, lengths))
    assert reversed_.tolist()[:2] == [[3, 8, 7, 6, 5, 0, 0], [3, 4, 9, 0, 0, 0, 0]]


@pytest.mark.parametrize("name,options,message", [
    ("luong", {"attention": "x"}, "Unknown alignment attention 'x' for model luong. Available: additive, "),
    ("luong", {"attention": "sinusoidal"}, "Unknown alignment attention 'sinusoidal' for model luong"),
    ("luong", {"cell": "rnn"}, "argument `cell`, expected one of 'gru', 'lstm'. Received: cell='rnn'"),
    ("luong", {"hidden_size": 7}, "expected an even integer with bidirectional=True"),
    ("seq2seq", {"num_layers": 0}, "argument `num_layers`, expected a positive integer. Received: num_layers=0"),
    ("seq2seq", {"dropout": 1.0}, "argument `dropout`, expected a float in \\[0, 1\\)"),
    ("bahdanau", {"cell": "lstm2"}, "Received: cell='lstm2'"),
    ("transformer", {"num_heads": 3}, "expected a multiple of num_heads=3"),
    ("transformer", {"positions": "rotary", "embed_dim": 6, "num_heads": 2}, "an even embed_dim / num_heads\\) with positions=.rotary."),
    ("transformer", {"positions": "xpos"}, "Received: positions='xpos'"),
])
def test_invalid_arguments_fail_early_with_a_clear_message(name, options, message):
    with pytest.raises(ValueError, match=message):
        make(name, **options)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("name", SEQ2SEQ)
def test_masks_hold_in_mixed_precision(name, policy):
    """trainer.precision=mixed_*: padding still gets exactly 0 attention and the logits stay finite
    (the masks use a big negative that float16 can hold, not -1e9)."""
    model = make(name, dtype=policy)
    logits = keras.ops.convert_to_numpy(keras.ops.cast(model((SOURCE, TARGET_IN)), "float32"))
    assert np.all(np.isfinite(logits))
    weights = keras.ops.convert_to_numpy(keras.ops.cast(model.attention_weights((SOURCE, TARGET_IN)), "float32"))
    pad = np.broadcast_to((SOURCE == 0)[:, None, :], weights.shape)
    assert np.all(weights[pad] == 0.0)
    if getattr(model, "has_attention", True):
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=2e-2)
