"""``zoo.fast.transformer``: the Transformer gives the same numbers with ``kernels=fast`` (real rows,
joined projections, row decoding steps) as with ``kernels=reference`` (each layer's one ``call``):
the training step's features and gradients over every weight, teacher-forced logits and attention
maps, the memory and cache a decoder reads, and greedy-decoded ids; for the position encodings and
the layer options. Beam search and sampling over the same model: ``tests/fast/test_decoding.py``."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops
from models.test_models import SOURCE, TARGET_IN, TINY

import zoo.attention
import zoo.models
from zoo import kernels
from zoo.decoding import greedy_decode_with_scores
from zoo.fast import transformer as fast

TOLERANCE = dict(rtol=1e-5, atol=1e-5)
OPTIONS = [
    {},  # rotary positions
    {"positions": "sinusoidal", "norm_first": True, "activation": "gelu"},
    {"positions": "learned", "tie_output": True, "num_layers": 1},
    # the attention options: the fast path computes positions=none itself; a score bias, shared key-value
    # heads and a window run the reference layers (zoo.fast.transformer.plain_block)
    {"positions": "none", "num_layers": 1},
    {"positions": "relative", "num_layers": 1},
    {"num_kv_heads": 1, "num_layers": 1},
    {"attention_window": 2, "num_layers": 1},
]
KEYS = {  # the replacements that stay in force while a SavedModel is traced
    "zoo.models.self_attention.transformer.TransformerSeq2Seq.encode": fast.encode,
    "zoo.models.self_attention.transformer.TransformerSeq2Seq.decode_features": fast.decode_features,
}
TRAINING_ONLY = {  # registered with a custom gradient: a SavedModel runs the reference there
    "zoo.models.self_attention.transformer._EncoderLayer.call": fast.encoder_layer,
    "zoo.models.self_attention.transformer._DecoderLayer.call": fast.decoder_layer,
    "zoo.models.self_attention.transformer.TransformerSeq2Seq.training_features": fast.training_features,
}


def _model(**options):
    keras.utils.set_random_seed(0)
    model = zoo.models.create("transformer", source_vocab_size=13, target_vocab_size=11,
                              **{**TINY["transformer"], "dropout": 0.0, **options})
    projection = model.ensure_built().output_projection if not model.tie_output else None
    if projection is not None:  # far from uniform, as training makes it: greedy's choices are clear
        projection.kernel.assign(projection.kernel * 30.0)
    return model


def _numpy(values):
    return [np.zeros(1) if v is None else ops.convert_to_numpy(v) for v in values]


def _close(fast_values, reference_values, what):
    assert len(fast_values) == len(reference_values)
    for i, (a, b) in enumerate(zip(fast_values, reference_values)):
        np.testing.assert_allclose(a, b, **TOLERANCE, err_msg=f"{what} {i}")


def test_the_replacements_are_registered_and_the_training_ones_left_out_of_exports():
    for key, replacement in {**KEYS, **TRAINING_ONLY}.items():
        with kernels.using("fast"):
            assert kernels.replacement(key) is replacement
            with kernels.exporting():
                assert kernels.replacement(key) is (None if key in TRAINING_ONLY else replacement)
        with kernels.using("reference"):
            assert kernels.replacement(key) is None


def test_an_exported_decoding_step_has_no_custom_gradient():
    model = _model(num_layers=1)  # each layer runs the same code: one keeps the trace small
    source = tf.TensorSpec([None, None], tf.int32)
    with kernels.using("fast"), kernels.exporting():
        @tf.function(input_signature=[source])
        def step(source):
            memory = model.encode(source)
            state = model.initial_state(memory, max_length=4)
            return model.decode_features(tf.fill(tf.shape(source)[:1], 2), state, memory)[0]

        graph = step.get_concrete_function().graph
    types = {op.type for op in graph.get_operations()}
    for function in graph._functions.values():
        types |= {node.op for node in function.definition.node_def}
    assert "BatchMatMulV3" in types  # the fast step, on TensorFlow's own kernels
    assert not [op for op in graph.get_operations() if "_gradient_op_type" in op.node_def.attr]


def _training_step(model):
    def step(source, target_in):
        with tf.GradientTape() as tape:
            features = model((source, target_in), training=True, return_features=True)
            loss = tf.reduce_sum(features * tf.sin(features))
        return [features, *tape.gradient(loss, model.trainable_variables)]

    return step


def _close_step(fast_values, reference_values):
    """Features within ``TOLERANCE``; gradients, sums over every position, within 1e-4 relative and
    1e-5 of the largest of their array (float32 sums in another order)."""
    _close(fast_values[:1], reference_values[:1], "features")
    for i, (a, b) in enumerate(zip(fast_values[1:], reference_values[1:])):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(b).max()), err_msg=f"gradient {i}")
    assert not np.any(reference_values[0][TARGET_IN == 0])  # padding: 0


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "rotary")
def test_training_features_and_gradients_are_the_same_fast_and_reference(options):
    """The training step's features (0 at padding) and the gradients of a loss of them over every weight."""
    model = _model(**options)
    results = {}
    for mode in kernels.MODES:
        with kernels.using(mode):
            results[mode] = _numpy(_training_step(model)(tf.constant(SOURCE), tf.constant(TARGET_IN)))
    _close_step(results["fast"], results["reference"])


def test_training_with_dropout_draws_the_same_masks_fast_and_reference():
    """Dropout on the real rows uses the mask the reference draws for the whole grid: two models made
    alike (the same weights and dropout seeds) train alike whichever mode each runs in."""
    results = {}
    for mode in kernels.MODES:
        with kernels.using(mode):
            model = _model(dropout=0.3)
            step = _training_step(model)
            results[mode] = [_numpy(step(tf.constant(SOURCE), tf.constant(TARGET_IN))) for _ in range(2)]
    for fast_values, reference_values in zip(results["fast"], results["reference"]):
        _close_step(fast_values, reference_values)


def test_a_compiled_training_step_with_lengths_known_at_run_time_is_the_reference():
    """As ``fit`` traces it: the fast path's products then choose their kernels by a ``cond``. One layer
    keeps the trace small (two layers, eagerly: the tests above and below)."""
    model = _model(num_layers=1)
    spec = tf.TensorSpec([None, None], tf.int32)
    with kernels.using("fast"):
        compiled = tf.function(lambda s, t: _training_step(model)(s, t), input_signature=[spec, spec])
        fast_values = _numpy(compiled(SOURCE, TARGET_IN))
    with kernels.using("reference"):
        _close_step(fast_values, _numpy(_training_step(model)(tf.constant(SOURCE), tf.constant(TARGET_IN))))


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "rotary")
def test_teacher_forcing_memory_and_decoding_are_the_same_fast_and_reference(options):
    """Teacher-forced logits and attention maps, the memory ``encode`` gives, three decoding steps
    (features, cross-attention rows, caches) and greedy-decoded ids."""
    model = _model(**options)
    results = {}
    for mode in kernels.MODES:
        with kernels.using(mode):
            logits = model((SOURCE, TARGET_IN))
            maps = model.attention_maps((SOURCE, TARGET_IN))
            memory = model.encode(SOURCE)
            state = model.initial_state(memory, max_length=4)
            steps = []
            for t in range(3):
                features, state, row = model.decode_features(TARGET_IN[:, t], state, memory)
                steps += [features, row]
            ids, _, lengths, logprob = greedy_decode_with_scores(model, SOURCE, 4)  # past the window of 2
            results[mode] = {
                "logits": _numpy([logits]), "maps": _numpy([m for key in sorted(maps) for m in maps[key]]),
                "memory": _numpy([memory["memory"], *memory["cross_keys"], *memory["cross_values"]]),
                "steps": _numpy([*steps, *state]), "logprob": _numpy([logprob]),
                "ids": [ids.numpy(), lengths.numpy()],
            }
    for key, reference_values in results["reference"].items():
        if key == "ids":
            for a, b in zip(results["fast"][key], reference_values):
                np.testing.assert_array_equal(a, b)
        else:
            _close(results["fast"][key], reference_values, key)


def test_weights_saved_in_one_mode_load_in_the_other(tmp_path):
    """The same variables whichever mode built the model: weights move across and give the same numbers."""
    path = tmp_path / "transformer.weights.h5"
    with kernels.using("fast"):
        trained = _model()
        trained((SOURCE, TARGET_IN), return_features=True)
        trained.save_weights(path)
        want = ops.convert_to_numpy(trained((SOURCE, TARGET_IN)))
    with kernels.using("reference"):
        loaded = zoo.models.create("transformer", source_vocab_size=13, target_vocab_size=11,
                                   **{**TINY["transformer"], "dropout": 0.0}).ensure_built()
        loaded.load_weights(path)
        assert [v.path for v in loaded.weights] == [v.path for v in trained.weights]
        np.testing.assert_allclose(ops.convert_to_numpy(loaded((SOURCE, TARGET_IN))), want, **TOLERANCE)


def test_another_self_attention_gives_its_own_numbers_fast_and_reference():
    """``attention=<a subclass of MultiHeadAttention>`` (here one that doubles the queries): the fast path
    runs the subclass's own ``attention`` (the reference layers), not ``multi_head``'s."""
    from zoo.attention.base_attention import ATTENTIONS
    from zoo.attention.multi_head_attention import MultiHeadAttention

    @zoo.attention.register_attention("throwaway_sharp")
    class Sharp(MultiHeadAttention):
        def attention(self, queries, keys, values, mask=None, training=None, bias=None, value_term=None):
            return super().attention(queries * 2.0, keys, values, mask, training=training, bias=bias,
                                     value_term=value_term)

    try:
        model = _model(attention="throwaway_sharp", num_layers=1)
        plain = _model(num_layers=1)
        results = {}
        for mode in kernels.MODES:
            with kernels.using(mode):
                results[mode] = _numpy(_training_step(model)(tf.constant(SOURCE), tf.constant(TARGET_IN)))
                results[mode].append(ops.convert_to_numpy(model((SOURCE, TARGET_IN))))
        _close_step(results["fast"][:-1], results["reference"][:-1])
        _close(results["fast"][-1:], results["reference"][-1:], "logits")
        assert not np.allclose(results["reference"][-1], ops.convert_to_numpy(plain((SOURCE, TARGET_IN))))
    finally:
        ATTENTIONS.unregister("throwaway_sharp")
