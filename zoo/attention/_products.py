"""The two products and the softmax of multi-head attention, on heads-first operands, with the
kernels chosen by size (private helper of ``MultiHeadAttention.attend_heads``; the kernels themselves
and the size rule are ``_kernels``', which also runs every alignment attention's context product).

On x86, TensorFlow runs ``BatchMatMulV2`` (what ``matmul`` and ``einsum`` emit) and ``Softmax`` as
oneDNN primitives by default, whose fixed cost per call is many times the arithmetic of a small
attention: d2l's sizes (``[64, 4, 9, 8]`` per operand) or one decoding step (one query per head).
``BatchMatMulV3`` (the same product, with an output dtype) is not rewritten to oneDNN: TensorFlow's
own kernel runs it. Measured on the project's 2-core CPU (docs/performance.md, 2026-11-25,
afternoon), per product: ``[64, 4, 9, 8] x [64, 4, 8, 9]`` 94 -> 49 us, one decoding query
``[64, 4, 1, 64] x [64, 4, 64, 64]`` 204 -> 75 us; but where a head's product is large
(``Tq Tk d_k`` of 20 x 20 x 64, the base size) oneDNN's kernel is 2-4x faster. So:

- one query per head (decoding steps): TensorFlow's kernels, and the softmax as
  ``exp(log_softmax)`` (``LogSoftmax`` is not rewritten either: 4 softmaxes of ``[16, 4, 1, 64]``
  per step took a third of the small Transformer's cached decoding);
- ``Tq Tk d_k <= SMALL_WORK``: TensorFlow's kernels (decided at trace time where the lengths are
  static, else by a ``cond`` on the batch's lengths: a training step's batches vary);
- anything larger, another backend, or another dtype than float32 (oneDNN's bfloat16 is what makes
  ``mixed_bfloat16`` pay): ``keras.ops`` as before.

With oneDNN off (``trainer.onednn=false``) both products run the same kernel either way; the
gradients of the small products are small products too (``tf.custom_gradient``).

The heads' moves between ``[B, T, H, d]`` and ``[B, H, T, d]`` (``move_axes``) take the same choice
for narrow heads (``H d <= 64``, d2l's sizes): TensorFlow's own transpose, forward and backward.
Small Transformer training step, trees alternating (``python -m zoo.bench sizes=[small]``): 10.0 /
9.6 / 9.6 -> 8.0 / 9.1 / 8.3 ms, 1.21-1.26x -> 1.41-1.49x ``keras_transformer``.
"""

from keras import ops

from zoo.attention._kernels import either, mix, small_scores, small_work
from zoo.attention.base_attention import masked_softmax, small_softmax

NARROW_HEADS = 64  # H * d at or below which the heads move between layouts by TensorFlow's own transpose


def is_small(queries, keys):
    """True, False, or (lengths known only at run time) a scalar bool tensor: whether one head's
    ``Q K^T`` (``queries [B, H, Tq, d]``, ``keys [B, H, Tk, d]``) is small enough for TensorFlow's
    own kernels. False wherever those are not in play (``_kernels.own_kernels``)."""
    return small_work(queries, (queries.shape[2], keys.shape[2], queries.shape[3]),
                      lambda: (ops.shape(queries)[2], ops.shape(keys)[2], ops.shape(queries)[3]))


def attention_weights(queries, keys, mask, small):
    """``softmax(Q K^T)`` (the keys carry the scale) for heads-first ``queries [B, H, Tq, d]`` and
    ``keys [B, H, Tk, d]``, ``mask`` bool broadcastable to ``[B, H, Tq, Tk]`` or None; ``small`` from
    ``is_small``."""
    def default():
        return masked_softmax(ops.matmul(queries, ops.swapaxes(keys, -1, -2)), mask)

    if small is True and queries.shape[2] == 1:
        return small_softmax(small_scores(queries, keys), mask)
    return either(small, lambda: masked_softmax(small_scores(queries, keys), mask), default)


def weighted_values(weights, values, small):
    """``W V``: ``weights [B, H, Tq, Tk]``, ``values [B, H, Tk, d]`` -> ``[B, H, Tq, d]``."""
    return mix(weights, values, small)
