"""Multi-head attention's products on TensorFlow's own kernels (``zoo/attention/_products.py``):
the same numbers and gradients as ``keras.ops`` forward and backward, chosen by size at trace time
or, with lengths unknown until run time, by the batch's lengths. The layer-level tests at the end
run on every backend; those of the kernels, their choice and the traced graph on TensorFlow only."""

import keras
import numpy as np
import pytest
from keras import ops

from zoo.attention import _kernels, _products

from attention_helpers import fixed_seed  # noqa: F401 (autouse fixture)

TENSORFLOW = keras.backend.backend() == "tensorflow"
if TENSORFLOW:  # other backends need not have it installed
    import tensorflow as tf
tensorflow_only = pytest.mark.skipif(
    not TENSORFLOW, reason="TensorFlow's own kernels and traced graphs: on other backends multi-head attention's "
                           "products are keras.ops throughout (the layer tests below still run)")


def operands(rng, b, h, tq, tk, d):
    q, k, v = (rng.normal(size=s).astype("float32") for s in ((b, h, tq, d), (b, h, tk, d), (b, h, tk, d)))
    mask = np.tril(np.ones((tq, tk), bool), k=tk - tq)[None, None] | (np.arange(tk) < 2)  # causal, every row some
    return tf.constant(q), tf.constant(k), tf.constant(v), tf.constant(np.broadcast_to(mask, (b, 1, tq, tk)))


def reference(q, k, v, mask):
    """Eq. 1 with ``keras.ops`` alone: the products as before, and the masked softmax."""
    from zoo.attention.base_attention import masked_softmax

    weights = masked_softmax(ops.matmul(q, ops.swapaxes(k, -1, -2)), mask)
    return weights, ops.matmul(weights, v)


def with_gradients(fn, q, k, v, mask):
    with tf.GradientTape() as tape:
        tape.watch([q, k, v])
        weights, heads = fn(q, k, v, mask)
        loss = tf.reduce_sum(heads * tf.sin(heads)) + tf.reduce_sum(weights * weights)
    return [weights, heads, *tape.gradient(loss, [q, k, v])]


def ours(q, k, v, mask):
    small = _products.is_small(q, k)
    weights = _products.attention_weights(q, k, mask, small)
    return weights, _products.weighted_values(weights, v, small)


def op_types(fn, *specs):
    graph = tf.function(fn).get_concrete_function(*specs).graph
    found = {op.type for op in graph.get_operations()}
    for function in graph._functions.values():  # the cond's branches and the custom gradients
        found |= {node.op for node in function.definition.node_def}
    return found


@tensorflow_only
@pytest.mark.parametrize("shape", [(2, 3, 5, 7, 4), (2, 2, 1, 6, 8), (1, 2, 40, 40, 8)],
                         ids=["small", "one-query", "large"])
def test_same_weights_heads_and_gradients_as_keras_ops(shape):
    q, k, v, mask = operands(np.random.default_rng(0), *shape)
    expected = with_gradients(reference, q, k, v, mask)
    got = with_gradients(ours, q, k, v, mask)
    for name, a, b in zip(["weights", "heads", "dq", "dk", "dv"], got, expected):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5, err_msg=name)


@tensorflow_only
def test_lengths_known_at_run_time_choose_by_the_batch_and_keep_the_numbers():
    spec = tf.TensorSpec([None, 2, None, 4], tf.float32)
    mask_spec = tf.TensorSpec([None, 1, None, None], tf.bool)
    step = tf.function(lambda q, k, v, m: with_gradients(ours, q, k, v, m), input_signature=[spec] * 3 + [mask_spec])
    for tq in (3, 70):  # 3 x 3 x 4 <= SMALL_WORK (TensorFlow's kernels); 70 x 70 x 4 above it
        q, k, v, mask = operands(np.random.default_rng(tq), 2, 2, tq, tq, 4)
        for a, b in zip(step(q, k, v, mask), with_gradients(reference, q, k, v, mask)):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


@tensorflow_only
def test_the_choice_by_size():
    def decide(tq, tk, d):
        return _products.is_small(tf.zeros((1, 1, tq, d)), tf.zeros((1, 1, tk, d)))

    assert decide(1, 4096, 64) is True  # one query per head: a decoding step, any size
    assert decide(9, 9, 8) is True  # d2l's sizes
    assert decide(20, 20, 64) is False  # the base size: oneDNN's kernels are faster there
    assert decide(32, 32, 8) is True and decide(33, 32, 8) is False  # SMALL_WORK = 8192
    assert _products.is_small(tf.zeros((1, 1, 9, 8), tf.bfloat16), tf.zeros((1, 1, 9, 8), tf.bfloat16)) is False

    def traced(tq_static):
        spec = tf.TensorSpec([None, 4, tq_static, 8], tf.float32)
        return op_types(lambda q, k, v: ours(q, k, v, None), spec, spec, spec)

    one = traced(1)  # TensorFlow's kernels only, the softmax as exp(log_softmax)
    assert {"BatchMatMulV3", "LogSoftmax"} <= one and not {"BatchMatMulV2", "Softmax"} & one
    unknown = traced(None)  # chosen per batch: both kernels, behind a cond
    assert {"BatchMatMulV3", "BatchMatMulV2"} <= unknown and {"If", "StatelessIf"} & unknown


@tensorflow_only
@pytest.mark.parametrize("weights_shape, values_shape, kernel", [
    ((3, 1, 9), (3, 9, 16), "BatchMatMulV3"),  # one query (a decoding step, bahdanau's training loop)
    ((3, 9, 9), (3, 9, 64), "BatchMatMulV3"),  # d2l's teacher-forced luong: 9 x 9 x 64 <= SMALL_WORK
    ((2, 4, 20), (2, 20, 512), "BatchMatMulV2"),  # four hypotheses at base: oneDNN's
])
def test_the_alignment_attentions_context_product_by_size_with_the_same_values_and_gradients(
        weights_shape, values_shape, kernel):
    """``_kernels.mix`` (``BaseAttention.attend``'s ``W V``): ``ops.matmul``'s numbers and gradients,
    on TensorFlow's own kernel where small, forward and backward."""
    rng = np.random.default_rng(2)
    w = tf.constant(rng.random(weights_shape).astype("float32"))
    v = tf.constant(rng.normal(size=values_shape).astype("float32"))

    def both(fn, w, v):
        with tf.GradientTape() as tape:
            tape.watch([w, v])
            out = fn(w, v)
            loss = tf.reduce_sum(out * tf.sin(out))
        return [out, *tape.gradient(loss, [w, v])]

    for a, b in zip(both(_kernels.mix, w, v), both(ops.matmul, w, v)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)
    specs = [tf.TensorSpec(weights_shape, tf.float32), tf.TensorSpec(values_shape, tf.float32)]
    found = op_types(lambda w, v: both(_kernels.mix, w, v), *specs)
    assert kernel in found and not ({"BatchMatMulV2", "BatchMatMulV3"} - {kernel}) & found


@tensorflow_only
@pytest.mark.parametrize("shape, kernel", [((3, 1, 9), "LogSoftmax"), ((3, 4, 9), "LogSoftmax"),
                                           ((2, 20, 20), "LogSoftmax"), ((2, 40, 40), "Softmax")])
def test_an_alignment_attentions_small_softmax_is_the_masked_softmax(shape, kernel):
    """``BaseAttention.attend``'s weights: ``exp(log_softmax)`` where ``Tq Tk <= SMALL_SCORES`` (or one
    query), with ``masked_softmax``'s values and gradients, a fully masked row all zeros; larger
    scores keep the softmax primitive."""
    import zoo.attention
    from zoo.attention.base_attention import masked_softmax, small_softmax

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

    got, want = both(small_softmax, scores), both(masked_softmax, scores)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.any(got[0].numpy()[0])
    layer = zoo.attention.create("dot")
    query = tf.constant(rng.normal(size=(shape[0], shape[1], 4)).astype("float32"))
    value = tf.constant(rng.normal(size=(shape[0], shape[2], 4)).astype("float32"))
    layer.build(query.shape, value.shape)
    found = op_types(lambda q, v: layer.attend(q, v, layer.prepare(v), mask=mask),
                     tf.TensorSpec(query.shape, tf.float32), tf.TensorSpec(value.shape, tf.float32))
    assert kernel in found and not ({"LogSoftmax", "Softmax"} - {kernel}) & found


def test_additive_scores_are_v_dot_tanh_of_the_sums():
    """``AdditiveAttention.score`` (``v^T tanh(W q + U k)`` through one ``[B Tq Tv, U] x [U, 1]``
    product): the einsum of the equation, for several queries."""
    import zoo.attention

    layer = zoo.attention.create("additive", units=6)
    rng = np.random.default_rng(3)
    query, value = rng.normal(size=(2, 3, 5)).astype("float32"), rng.normal(size=(2, 4, 7)).astype("float32")
    layer.build(query.shape, value.shape)
    keys = layer.prepare(value)
    hidden = ops.tanh(ops.expand_dims(layer.query_dense(query), -2) + ops.expand_dims(keys, -3))
    expected = ops.einsum("bqku,u->bqk", hidden, layer.v)
    np.testing.assert_allclose(ops.convert_to_numpy(layer.score(query, keys)), ops.convert_to_numpy(expected),
                               rtol=1e-5, atol=1e-6)


def test_multi_head_layer_on_both_paths_gives_the_same_output():
    import zoo.attention

    layer = zoo.attention.create("multi_head", num_heads=2, key_dim=8)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 40, 16)).astype("float32")
    full = ops.convert_to_numpy(layer(x[:, :40], x[:, :40]))  # 40 x 40 x 8 > SMALL_WORK: keras.ops
    one = ops.convert_to_numpy(layer(x[:, 39:40], x[:, :40]))  # one query: TensorFlow's kernels (there)
    np.testing.assert_allclose(one[:, 0], full[:, 39], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("parts", [("query", "key", "value"), ("key", "value"), ("query",)])
def test_projections_heads_first_in_one_transpose_are_the_split_projections_moved(parts):
    import zoo.attention
    from zoo.attention.multi_head_attention import heads_major

    layer = zoo.attention.create("multi_head", num_heads=3, key_dim=2)
    x = np.random.default_rng(2).normal(size=(2, 5, 6)).astype("float32")
    layer(x, x)  # built
    split = layer.project(x, parts)  # each [B, T, H, d]
    first = layer.project(x, parts, heads_first=True)  # each [B, H, T, d]
    assert len(first) == len(parts)
    for a, b in zip(first, split):
        assert tuple(a.shape) == (2, 3, 5, 2)
        np.testing.assert_allclose(ops.convert_to_numpy(a), ops.convert_to_numpy(heads_major(b)), rtol=1e-6, atol=1e-6)
    if len(parts) > 1 and TENSORFLOW:  # one transpose for all the parts (in TensorFlow's traced graph)
        spec = tf.TensorSpec([None, None, 6], tf.float32)
        graph = tf.function(lambda t: layer.project(t, parts, heads_first=True)).get_concrete_function(spec).graph
        moves = [op for op in graph.get_operations() if op.type == "Transpose" and "Tensordot" not in op.name]
        assert len(moves) == 1 and not any(op.type == "SplitV" for op in graph.get_operations())


@tensorflow_only
@pytest.mark.parametrize("perm", [(0, 2, 1, 3), (2, 0, 3, 1, 4)])
def test_narrow_heads_move_by_tensorflows_own_transpose_with_the_same_values_and_gradients(perm):
    """``base_attention.move_axes(..., own_kernel=True)``: the values and gradients of ``ops.transpose``, in a compiled
    function, from Transpose ops on int32 bits (oneDNN rewrites float32 ones only)."""
    from zoo.attention.base_attention import move_axes

    rng = np.random.default_rng(3)
    shape = (4, 5, 3, 2, 6) if len(perm) == 5 else (4, 5, 3, 6)
    x = tf.constant(rng.normal(size=shape).astype("float32"))
    weight = tf.constant(rng.normal(size=[shape[p] for p in perm]).astype("float32"))

    def moved_and_gradient(own_kernel):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = move_axes(x, perm, own_kernel)
            loss = tf.reduce_sum(y * weight)
        return y, tape.gradient(loss, x)

    step = tf.function(moved_and_gradient, autograph=False)
    (y, grad), (y_ref, grad_ref) = step(True), step(False)
    np.testing.assert_array_equal(y.numpy(), np.transpose(x.numpy(), perm))
    np.testing.assert_array_equal(y.numpy(), y_ref.numpy())
    np.testing.assert_array_equal(grad.numpy(), grad_ref.numpy())
    graph = step.get_concrete_function(True).graph
    moves = [op for op in graph.get_operations() if op.type == "Transpose"]
    assert moves and all(op.get_attr("T") == tf.int32 for op in moves)
    gradient_graph = [f for f in graph.as_graph_def().library.function]
    assert all(node.attr["T"].type == tf.int32.as_datatype_enum
               for f in gradient_graph for node in f.node_def if node.op == "Transpose")
