"""``zoo.fast.attention``: every registered attention gives the same outputs, weights and gradients
with ``kernels=fast`` as with ``kernels=reference`` (float32 tolerance), whole and one query at a
time (a decoder's steps, where the small kernels run), with lengths known at trace time or only at
run time; and the kernels themselves: TensorFlow's own products, softmax and transposes, chosen by
size, with ``keras.ops``' values and gradients."""

import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

import zoo.attention
from zoo import kernels
from zoo.attention.base_attention import masked_softmax
from zoo.fast import attention as fast

B, TQ, TV, D = 2, 4, 5, 6
VALUE_MASK = np.array([[True, True, True, False, False], [False] * TV])  # a row with nothing to attend to
TOLERANCE = dict(rtol=1e-5, atol=1e-5)


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (tf.constant(rng.normal(size=(B, TQ, D)).astype("float32")),
            tf.constant(rng.normal(size=(B, TV, D)).astype("float32")))


def _run(mode, layer, query, value, step_by_step=False):
    """Output, weights and the gradients of a loss of both over the layer's weights and the inputs."""
    with kernels.using(mode), tf.GradientTape() as tape:
        tape.watch([query, value])
        if step_by_step:  # as an RNN decoder: the memory prepared once, one query a step
            prepared = layer.prepare(value)
            steps = []
            arguments = inspect.signature(layer.attend).parameters
            for t in range(TQ):
                extra = {"position_offset": t} if "position_offset" in arguments else {}
                if "previous_weights" in arguments:  # location_aware: the weights of the step before
                    extra["previous_weights"] = steps[-1][1] if steps else layer.initial_weights(VALUE_MASK)[:, None]
                mask = layer.combine_masks(query[:, t:t + 1], value, value_mask=VALUE_MASK)
                steps.append(layer.attend(query[:, t:t + 1], value, prepared, mask=mask, return_attention_scores=True,
                                          **extra))
            output = ops.concatenate([s[0] for s in steps], axis=1)
            weights = ops.concatenate([s[1] for s in steps], axis=-2)
        else:
            output, weights = layer(query, value, value_mask=VALUE_MASK, return_attention_scores=True)
        loss = ops.sum(output * ops.sin(output)) + ops.sum(weights * weights)
    variables = [query, value, *layer.trainable_variables]
    gradients = [np.zeros(v.shape, "float32") if g is None else ops.convert_to_numpy(g)
                 for v, g in zip(variables, tape.gradient(loss, variables))]
    return [ops.convert_to_numpy(output), ops.convert_to_numpy(weights), *gradients]


@pytest.mark.parametrize("step_by_step", [False, True], ids=["whole", "one-query-a-step"])
@pytest.mark.parametrize("name", zoo.attention.alignment_names())
def test_every_alignment_attention_is_the_same_fast_and_reference(name, step_by_step):
    keras.utils.set_random_seed(0)
    query, value = _inputs()
    layer = zoo.attention.create(name)
    layer(query, value)
    fast_results = _run("fast", layer, query, value, step_by_step)
    reference_results = _run("reference", layer, query, value, step_by_step)
    for i, (a, b) in enumerate(zip(fast_results, reference_results)):
        np.testing.assert_allclose(a, b, **TOLERANCE, err_msg=f"{name}: result {i}")


@pytest.mark.parametrize("normalizer", ["sparsemax", "entmax15"])
@pytest.mark.parametrize("name", [n for n in zoo.attention.alignment_names()
                                  if len(zoo.attention.create(n).normalizers) > 1])
def test_sparse_normalizers_are_the_same_fast_and_reference(name, normalizer):
    """With ``normalizer=sparsemax|entmax15`` the fast ``attend`` takes the reference's normaliser
    (only the context product may run on TensorFlow's own kernel): outputs, weights with their exact
    zeros, and gradients equal, whole and one query at a time."""
    keras.utils.set_random_seed(0)
    query, value = _inputs()
    layer = zoo.attention.create(name, normalizer=normalizer)
    layer(query, value)
    for step_by_step in (False, True):
        fast_results = _run("fast", layer, query, value, step_by_step)
        reference_results = _run("reference", layer, query, value, step_by_step)
        assert np.array_equal(fast_results[1] == 0, reference_results[1] == 0)
        assert np.any(reference_results[1][0] == 0) and np.all(reference_results[1][1] == 0)
        for i, (a, b) in enumerate(zip(fast_results, reference_results)):
            np.testing.assert_allclose(a, b, **TOLERANCE, err_msg=f"{name} {normalizer}: result {i}")


def test_multi_head_lengths_known_at_run_time_are_the_same_fast_and_reference():
    """A training step's batches vary in length: the fast products then choose by a ``cond``."""
    layer = zoo.attention.create("multi_head", num_heads=2, key_dim=4)
    spec = tf.TensorSpec([None, None, D], tf.float32)
    for length in (3, 40):  # 3 x 3 x 4 <= SMALL_WORK (TensorFlow's kernels); 40 x 40 x 4 above it
        x = tf.constant(np.random.default_rng(length).normal(size=(2, length, D)).astype("float32"))
        layer(x, x)
        results = {}
        for mode in kernels.MODES:
            with kernels.using(mode):
                def step(x):
                    with tf.GradientTape() as tape:
                        tape.watch(x)
                        output = layer(x, x, use_causal_mask=True)
                        loss = tf.reduce_sum(output * tf.sin(output))
                    return [output, *tape.gradient(loss, [x, *layer.trainable_variables])]

                results[mode] = tf.function(step, input_signature=[spec])(x)
        for a, b in zip(results["fast"], results["reference"]):
            np.testing.assert_allclose(a.numpy(), b.numpy(), **TOLERANCE)


EXPORTED = {  # no custom gradient of their own: they stay in force while a SavedModel is traced
    "zoo.attention.base_attention.BaseAttention.attend": fast.attend,
    "zoo.attention.multi_head_attention.MultiHeadAttention.attention": fast.attention,
    "zoo.attention.multi_head_attention.MultiHeadAttention.split_heads": fast.split_heads,
    "zoo.attention.multi_head_attention.MultiHeadAttention.merge_heads": fast.merge_heads,
    "zoo.attention.additive_attention.AdditiveAttention.score": fast.additive_score,
}


def test_the_replacements_are_registered_and_exports_keep_those_without_a_custom_gradient():
    for key, replacement in EXPORTED.items():
        with kernels.using("fast"):
            assert kernels.replacement(key) is replacement
            with kernels.exporting():
                assert kernels.replacement(key) is replacement
        with kernels.using("reference"):
            assert kernels.replacement(key) is None
    with kernels.using("fast"):
        assert not fast.exporting()
        with kernels.exporting():
            assert fast.exporting()
        assert not fast.exporting()


def _custom_gradients(graph):
    """The ops ``tf.custom_gradient`` leaves in a graph (an ``IdentityN`` naming its gradient function)."""
    return [op for op in graph.get_operations() if "_gradient_op_type" in op.node_def.attr]


def test_while_exporting_the_small_kernels_run_without_custom_gradients():
    """A SavedModel traced with ``kernels.exporting()`` keeps TensorFlow's own kernels for one query
    and no custom gradient: loading it prints no warning about unsaved ones."""
    layer = zoo.attention.create("multi_head", num_heads=2, key_dim=3)
    query, value = _inputs()
    layer(query, value)
    specs = (tf.TensorSpec([B, 1, D], tf.float32), tf.TensorSpec(value.shape, tf.float32))
    with kernels.using("fast"):
        training = tf.function(lambda q, v: layer(q, v)).get_concrete_function(*specs).graph
        with kernels.exporting():
            exported = tf.function(lambda q, v: layer(q, v)).get_concrete_function(*specs).graph
    assert _custom_gradients(training) and not _custom_gradients(exported)
    assert "BatchMatMulV3" in {op.type for op in exported.get_operations()}


def test_reference_attention_is_plain_keras_ops():
    """The reference traces to no TensorFlow-only kernel: no BatchMatMulV3, LogSoftmax or int32 moves."""
    layer = zoo.attention.create("multi_head", num_heads=2, key_dim=3)
    query, value = _inputs()
    layer(query, value)
    with kernels.using("reference"):
        found = _op_types(lambda q, v: layer(q, v, use_causal_mask=True), tf.TensorSpec(query.shape, tf.float32),
                          tf.TensorSpec(value.shape, tf.float32))
    assert not {"BatchMatMulV3", "LogSoftmax", "Bitcast"} & found


# -- the kernels ------------------------------------------------------------------------------------
def _operands(rng, b, h, tq, tk, d):
    q, k, v = (rng.normal(size=s).astype("float32") for s in ((b, h, tq, d), (b, h, tk, d), (b, h, tk, d)))
    mask = np.tril(np.ones((tq, tk), bool), k=tk - tq)[None, None] | (np.arange(tk) < 2)  # causal, every row some
    return tf.constant(q), tf.constant(k), tf.constant(v), tf.constant(np.broadcast_to(mask, (b, 1, tq, tk)))


def _eq1_reference(q, k, v, mask):
    weights = masked_softmax(ops.matmul(q, ops.swapaxes(k, -1, -2)), mask)
    return weights, ops.matmul(weights, v)


def _eq1_fast(q, k, v, mask):
    small = fast.is_small(q, k)
    weights = fast.attention_weights(q, k, mask, small)
    return weights, fast.mix(weights, v, small)


def _with_gradients(fn, q, k, v, mask):
    with tf.GradientTape() as tape:
        tape.watch([q, k, v])
        weights, heads = fn(q, k, v, mask)
        loss = tf.reduce_sum(heads * tf.sin(heads)) + tf.reduce_sum(weights * weights)
    return [weights, heads, *tape.gradient(loss, [q, k, v])]


def _op_types(fn, *specs):
    graph = tf.function(fn).get_concrete_function(*specs).graph
    found = {op.type for op in graph.get_operations()}
    for function in graph._functions.values():  # the cond's branches and the custom gradients
        found |= {node.op for node in function.definition.node_def}
    return found


@pytest.mark.parametrize("shape", [(2, 3, 5, 7, 4), (2, 2, 1, 6, 8), (1, 2, 40, 40, 8)],
                         ids=["small", "one-query", "large"])
def test_the_products_have_keras_ops_values_and_gradients(shape):
    q, k, v, mask = _operands(np.random.default_rng(0), *shape)
    expected = _with_gradients(_eq1_reference, q, k, v, mask)
    got = _with_gradients(_eq1_fast, q, k, v, mask)
    for name, a, b in zip(["weights", "heads", "dq", "dk", "dv"], got, expected):
        np.testing.assert_allclose(a.numpy(), b.numpy(), **TOLERANCE, err_msg=name)


def test_the_products_choose_by_size():
    def decide(tq, tk, d):
        return fast.is_small(tf.zeros((1, 1, tq, d)), tf.zeros((1, 1, tk, d)))

    assert decide(1, 4096, 64) is True  # one query per head: a decoding step, any size
    assert decide(9, 9, 8) is True  # d2l's sizes
    assert decide(20, 20, 64) is False  # the base size: oneDNN's kernels are faster there
    assert decide(32, 32, 8) is True and decide(33, 32, 8) is False  # SMALL_WORK = 8192
    assert fast.is_small(tf.zeros((1, 1, 9, 8), tf.bfloat16), tf.zeros((1, 1, 9, 8), tf.bfloat16)) is False

    def traced(tq_static):
        spec = tf.TensorSpec([None, 4, tq_static, 8], tf.float32)
        return _op_types(lambda q, k, v: _eq1_fast(q, k, v, None), spec, spec, spec)

    one = traced(1)  # TensorFlow's kernels only, the softmax as exp(log_softmax)
    assert {"BatchMatMulV3", "LogSoftmax"} <= one and not {"BatchMatMulV2", "Softmax"} & one
    unknown = traced(None)  # chosen per batch: both kernels, behind a cond
    assert {"BatchMatMulV3", "BatchMatMulV2"} <= unknown and {"If", "StatelessIf"} & unknown


@pytest.mark.parametrize("weights_shape, values_shape, kernel", [
    ((3, 1, 9), (3, 9, 16), "BatchMatMulV3"),  # one query (a decoding step, bahdanau's training loop)
    ((3, 9, 9), (3, 9, 64), "BatchMatMulV3"),  # d2l's teacher-forced luong: 9 x 9 x 64 <= SMALL_WORK
    ((2, 4, 20), (2, 20, 512), "BatchMatMulV2"),  # four hypotheses at base: oneDNN's
])
def test_the_context_product_by_size_has_matmuls_values_and_gradients(weights_shape, values_shape, kernel):
    rng = np.random.default_rng(2)
    w = tf.constant(rng.random(weights_shape).astype("float32"))
    v = tf.constant(rng.normal(size=values_shape).astype("float32"))

    def both(fn, w, v):
        with tf.GradientTape() as tape:
            tape.watch([w, v])
            out = fn(w, v)
            loss = tf.reduce_sum(out * tf.sin(out))
        return [out, *tape.gradient(loss, [w, v])]

    for a, b in zip(both(fast.mix, w, v), both(ops.matmul, w, v)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), **TOLERANCE)
    specs = [tf.TensorSpec(weights_shape, tf.float32), tf.TensorSpec(values_shape, tf.float32)]
    found = _op_types(lambda w, v: both(fast.mix, w, v), *specs)
    assert kernel in found and not ({"BatchMatMulV2", "BatchMatMulV3"} - {kernel}) & found


@pytest.mark.parametrize("shape, kernel", [((3, 1, 9), "LogSoftmax"), ((3, 4, 9), "LogSoftmax"),
                                           ((2, 20, 20), "LogSoftmax"), ((2, 40, 40), "Softmax")])
def test_the_small_softmax_is_the_masked_softmax(shape, kernel):
    """``exp(log_softmax)`` where ``Tq Tk <= SMALL_SCORES`` (or one query), with ``masked_softmax``'s
    values and gradients, a fully masked row all zeros; larger scores keep the softmax primitive."""
    rng = np.random.default_rng(4)
    scores = tf.constant(rng.normal(size=shape).astype("float32"))
    mask = rng.random((shape[0], 1, shape[2])) > 0.3
    mask[0] = False  # a row with nothing to attend to
    mask = tf.constant(mask)

    def both(fn, x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = fn(x, mask)
            loss = tf.reduce_sum(out * tf.cos(out))
        return out, tape.gradient(loss, x)

    got, want = both(fast.small_softmax, scores), both(masked_softmax, scores)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.any(got[0].numpy()[0])
    layer = zoo.attention.create("dot")
    query = tf.constant(rng.normal(size=(shape[0], shape[1], 4)).astype("float32"))
    value = tf.constant(rng.normal(size=(shape[0], shape[2], 4)).astype("float32"))
    layer.build(query.shape, value.shape)
    with kernels.using("fast"):
        found = _op_types(lambda q, v: layer.attend(q, v, layer.prepare(v), mask=mask),
                          tf.TensorSpec(query.shape, tf.float32), tf.TensorSpec(value.shape, tf.float32))
    assert kernel in found and not ({"LogSoftmax", "Softmax"} - {kernel}) & found


@pytest.mark.parametrize("parts", [("query", "key", "value"), ("key", "value"), ("query",)])
def test_joined_projections_are_the_layers_projections(parts):
    """``fast.project``: one product for several projections, the queries scaled by ``1 / sqrt(d_k)``,
    heads first by one transpose: the values of the layer's own projections."""
    layer = zoo.attention.create("multi_head", num_heads=3, key_dim=2)
    x = np.random.default_rng(2).normal(size=(2, 5, 6)).astype("float32")
    layer(x, x)
    denses = {"query": layer.query_dense, "key": layer.key_dense, "value": layer.value_dense}
    first = fast.project(layer, x, parts, heads_first=True)  # each [B, H, T, d]
    assert len(first) == len(parts)
    for part, got in zip(parts, first):
        want = np.transpose(ops.convert_to_numpy(denses[part](x)), (0, 2, 1, 3)) * (layer.scale if part == "query" else 1)
        assert tuple(got.shape) == (2, 3, 5, 2)
        np.testing.assert_allclose(ops.convert_to_numpy(got), want, rtol=1e-6, atol=1e-6)
    if len(parts) > 1:  # one transpose for all the parts (in TensorFlow's traced graph)
        spec = tf.TensorSpec([None, None, 6], tf.float32)
        graph = tf.function(lambda t: fast.project(layer, t, parts, heads_first=True)).get_concrete_function(spec).graph
        moves = [op for op in graph.get_operations() if op.type == "Transpose" and "Tensordot" not in op.name]
        assert len(moves) == 1 and not any(op.type == "SplitV" for op in graph.get_operations())


def test_joined_projections_go_to_the_heads_in_one_map_only_at_one_width():
    layer = zoo.attention.create("multi_head", num_heads=2, key_dim=3, value_dim=5)
    layer.build((None, None, 6), (None, None, 6))
    with pytest.raises(ValueError, match=r"parts of one width. Received: parts=\('key', 'value'\) of widths \(6, 10\)"):
        fast.project(layer, np.ones((4, 6), "float32"), ("key", "value"), heads_first=True, to_heads=lambda *a: None)


@pytest.mark.parametrize("perm", [(0, 2, 1, 3), (2, 0, 3, 1, 4)])
def test_narrow_heads_move_by_tensorflows_own_transpose_with_the_same_values_and_gradients(perm):
    """``move_axes(..., own_kernel=True)``: the values and gradients of ``ops.transpose``, in a compiled
    function, from Transpose ops on int32 bits (oneDNN rewrites float32 ones only)."""
    rng = np.random.default_rng(3)
    shape = (4, 5, 3, 2, 6) if len(perm) == 5 else (4, 5, 3, 6)
    x = tf.constant(rng.normal(size=shape).astype("float32"))
    weight = tf.constant(rng.normal(size=[shape[p] for p in perm]).astype("float32"))

    def moved_and_gradient(mode):
        with kernels.using(mode), tf.GradientTape() as tape:
            tape.watch(x)
            y = fast.move_axes(x, perm, own_kernel=True) if mode == "fast" else keras.ops.transpose(x, perm)
            loss = tf.reduce_sum(y * weight)
        return y, tape.gradient(loss, x)

    step = tf.function(moved_and_gradient, autograph=False)
    (y, grad), (y_ref, grad_ref) = step("fast"), step("reference")
    np.testing.assert_array_equal(y.numpy(), np.transpose(x.numpy(), perm))
    np.testing.assert_array_equal(y.numpy(), y_ref.numpy())
    np.testing.assert_array_equal(grad.numpy(), grad_ref.numpy())
    graph = step.get_concrete_function("fast").graph
    moves = [op for op in graph.get_operations() if op.type == "Transpose"]
    assert moves and all(op.get_attr("T") == tf.int32 for op in moves)
