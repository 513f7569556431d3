"""The Vision Transformer (Dosovitskiy et al. 2021) reading digit strings: image patches as the tokens of
the zoo's Transformer encoder, its decoder writing the string; attention rollout (Abnar & Zuidema 2020)."""

import keras
from keras import ops

from zoo.checks import boolean, enforce, invalid, positive_int
from zoo.models.registry import register_model
from zoo.models.self_attention import transformer
from zoo.models.self_attention.transformer import CONSTRAINTS as TRANSFORMER_CONSTRAINTS
from zoo.models.self_attention.transformer import OWNED_OPTIONS as TRANSFORMER_OWNED_OPTIONS
from zoo.models.self_attention.transformer import TransformerSeq2Seq
from zoo.tokens import PAD_ID

PIXEL_MAX = 255.0  # images arrive as uint8 [B, H, W]: 0 background, 255 ink
# model.attention is the encoder's and decoder's self-attention, and the decoder's is causal; the options
# the model sets itself are refused in model.attention_options (read by the validator, zoo.config).
ATTENTION_KIND = "self"
CAUSAL = True
OWNED_OPTIONS = TRANSFORMER_OWNED_OPTIONS
# The rules between the arguments, declared once (zoo.catalog.model_constraints reads this literal): the
# Transformer's (embed_dim a multiple of num_heads, ...) and the patch side's. That patch_size divides the
# canvas, and that learned positions cover its N patches, is checked where the canvas is known: the config
# validator (zoo.config, data=digit_strings) and the model's first look at an image (``grid_shape``).
ADDED_POSITIONS = ("learned", "sinusoidal")  # the positions added to the patch embeddings (E_pos); 2-D with grid_positions
CONSTRAINTS = TRANSFORMER_CONSTRAINTS + (
    {"rule": "at_least", "key": "patch_size", "min": 1, "integer": True},
    {"rule": "one_of", "key": "positions", "values": ADDED_POSITIONS, "when": {"grid_positions": True},
     "why": "2-D positions are added to the patch embeddings, a row's and a column's"},
    {"rule": "even", "key": "embed_dim", "when": {"grid_positions": True},
     "why": "2-D positions give the row and the column D/2 features each"},
)


def rollout(maps):
    """Attention rollout (Abnar & Zuidema 2020, sec. 3): how much of each input token reaches each
    token at the top of a stack of self-attention layers, residual connections included.

    Each layer's attention ``A_l`` (``[B, H, N, N]``, averaged over the heads) is mixed with the identity
    for the residual connection, ``A~_l = 0.5 I + 0.5 A_l``, its rows renormalised to sum to 1; then
    the layers are multiplied from the first up, ``R = A~_L A~_{L-1} ... A~_1`` (the paper's recursion
    ``A~(l_i) = A(l_i) A~(l_{i-1})``), so ``R[j, i]`` is the share of input token ``i`` in output token ``j``.

    Args:
        maps: list of the ``L`` layers' weights ``[B, H, N, N]``, the first layer first.

    Returns:
        ``R`` ``[B, N, N]`` float32, rows summing to 1.

    Example:
        >>> import numpy as np
        >>> a = np.array([[[[0.0, 1.0], [1.0, 0.0]]]])  # one head swapping two tokens
        >>> np.round(np.asarray(rollout([a])), 2).tolist()
        [[[0.5, 0.5], [0.5, 0.5]]]

    References:
        Abnar, Zuidema. Quantifying Attention Flow in Transformers. ACL 2020.
        https://arxiv.org/abs/2005.00928
    """
    result = None
    for weights in maps:
        a = ops.mean(ops.cast(weights, "float32"), axis=1)  # A_l: heads averaged, [B, N, N]
        a = 0.5 * a + 0.5 * ops.eye(ops.shape(a)[-1], dtype="float32")  # the residual connection
        a = a / ops.sum(a, axis=-1, keepdims=True)  # rows renormalised
        result = a if result is None else ops.matmul(a, result)  # A~_l times the rollout below it
    return result


@keras.saving.register_keras_serializable(package="zoo")
class VisionTransformer(TransformerSeq2Seq):
    """Image patches embedded as tokens, read by the zoo's Transformer encoder; its decoder writes the
    digit string with cross-attention over the patches.

    **Patches** (Dosovitskiy et al. 2021, sec. 3.1). The image ``x`` (``uint8 [B, H, W]``, scaled to
    ``[0, 1]``; one channel, ``C = 1``) is cut into ``N = HW / P^2`` patches of ``P x P`` pixels
    (``P = patch_size``; ``P`` must divide ``H`` and ``W``), row-major over the ``h x w`` grid
    (``h = H / P``, ``w = W / P``, ``grid_shape``), each flattened: ``x_p`` ``[B, N, P^2 C]``. They are
    embedded linearly and given positions (eq. 1):

    ``z_0 = [x_p^1 E; x_p^2 E; ...; x_p^N E] + E_pos``,  ``E`` in ``R^{(P^2 C) x D}``, ``E_pos`` in ``R^{N x D}``

    then dropout. There is no ``[class]`` token: the decoder reads every patch. ``E_pos`` is the
    Transformer's ``positions`` over the patch sequence: ``learned`` (the paper's 1-D table; ``max_length``
    must cover ``N``), ``sinusoidal``; or positions inside self-attention (``rotary``, ``relative``, ``t5``,
    ``alibi``: the row-major distance between patches) or ``none``. With ``grid_positions`` the added
    positions are 2-D (the paper's appendix D.4): patch ``(r, c)`` gets ``E_pos = [E_Y(r); E_X(c)]``, a
    row embedding and a column embedding of ``D/2`` features each: with ``learned``, the first and the
    last ``D/2`` columns of the same table (``max_length`` must cover ``h`` and ``w``), with ``sinusoidal``
    the sinusoids of ``D/2`` channels of the row and of the column index.

    **Encoder** (eq. 2-4): the zoo Transformer's encoder layers over ``z_0``,
    ``z'_l = MSA(LN(z_{l-1})) + z_{l-1}``, ``z_l = MLP(LN(z'_l)) + z'_l`` with ``norm_first`` (the paper's
    pre-norm, GELU in the MLP with ``activation="gelu"``), and a final ``LN``; any self-attention of the zoo
    (``attention``) and all its options. **Decoder**: the zoo Transformer's decoder (Vaswani et al. 2017,
    sec. 3.1: causal self-attention over the digits so far, cross-attention over the ``N`` encoded patches,
    FFN), greedy and beam search with its key-value cache, the ``Seq2SeqModel`` interface unchanged: this
    is ``TransformerSeq2Seq`` with the patch embedding in place of the source embedding (which, unused,
    is the target's: ``share_embeddings``, no second table).

    **Attention over the image.** A step's attention is the last decoder layer's cross-attention,
    averaged over the heads, ``a_t`` ``[B, N]`` over the encoder's outputs. With ``rollout`` (the default)
    it is traced back through the encoder to the input patches, ``a_t R`` with ``R = rollout(encoder maps)``
    (computed once per image, in ``encode``): the share of each patch of pixels in what step ``t`` read;
    otherwise ``a_t`` itself. ``decode_step`` (greedy and beam search, the SavedModel's ``read``) and
    ``teacher_forced`` return it; ``decode_features`` keeps the Transformer's ``a_t``. Either way the rows
    sum to 1 and ``[B, T_out, N]`` reshapes to the grid, ``[B, T_out, h, w]``, which the image task's
    alignment metrics and pictures read (each cell a ``P x P`` block of pixels).

    Shapes: ``B`` batch, ``H x W`` image, ``P`` patch side, ``N = HW / P^2`` patches, ``D`` = ``embed_dim``,
    ``T`` output steps, ``V`` target vocabulary.

    Args:
        target_vocab_size: the output vocabulary (id 0 = padding), from the data.
        patch_size: positive int ``P``, the side of a square patch in pixels.
        embed_dim, intermediate_dim, num_layers, num_heads, dropout, attention_dropout, positions, max_length,
            norm_first, tie_output, activation, num_kv_heads, attention_window, attention, attention_options:
            as ``TransformerSeq2Seq``'s; ``positions`` and ``max_length`` apply to the patch sequence too.
        rollout: bool, the attention over the image traced back through the encoder (``a_t R``), or the
            cross-attention ``a_t`` alone.
        grid_positions: bool, 2-D added positions (``positions`` ``learned`` or ``sinusoidal``; an even
            ``embed_dim``), or 1-D over the row-major patch sequence.

    Example:
        >>> import numpy as np
        >>> model = VisionTransformer(14, patch_size=8, embed_dim=8, intermediate_dim=16, num_layers=1,
        ...                           num_heads=2)
        >>> images = np.zeros((2, 16, 32), "uint8")
        >>> tuple(model((images, np.array([[2, 5, 6], [2, 7, 0]]))).shape), model.grid_shape(16, 32)
        ((2, 3, 14), (2, 4))

    References:
        Dosovitskiy et al. An Image is Worth 16x16 Words: Transformers for Image Recognition at Scale.
        ICLR 2021, sec. 3.1, eq. 1-4. https://arxiv.org/abs/2010.11929
        Vaswani et al. Attention Is All You Need. NeurIPS 2017, sec. 3.
        Abnar, Zuidema. Quantifying Attention Flow in Transformers. ACL 2020.
    """

    def __init__(self, target_vocab_size, patch_size=16, embed_dim=64, intermediate_dim=128, num_layers=2,
                 num_heads=4, dropout=0.1, attention_dropout=0.0, positions="learned", max_length=128,
                 norm_first=True, tie_output=False, activation="gelu", num_kv_heads=None, attention_window=None,
                 attention="multi_head", attention_options=None, rollout=True, grid_positions=False, **kwargs):
        super().__init__(target_vocab_size, target_vocab_size, embed_dim=embed_dim, intermediate_dim=intermediate_dim,
                         num_layers=num_layers, num_heads=num_heads, dropout=dropout,
                         attention_dropout=attention_dropout, positions=positions, max_length=max_length,
                         norm_first=norm_first, share_embeddings=True, tie_output=tie_output, activation=activation,
                         num_kv_heads=num_kv_heads, attention_window=attention_window, attention=attention,
                         attention_options=attention_options, **kwargs)
        self.patch_size = positive_int("patch_size", patch_size)
        self.rollout = boolean("rollout", rollout)
        self.grid_positions = boolean("grid_positions", grid_positions)
        enforce(CONSTRAINTS, positions=positions, embed_dim=embed_dim, grid_positions=self.grid_positions)
        self.patch_embedding = keras.layers.Dense(embed_dim, name="patch_embedding", dtype=self.dtype_policy)  # E

    def build(self, input_shape=None):
        super().build(input_shape)
        self.patch_embedding.build((None, None, self.patch_size ** 2))
        self.built = True

    def grid_shape(self, height, width):
        """``(h, w) = (H / P, W / P)``, the patch grid of an ``height x width`` image; a ``ValueError``
        naming ``patch_size`` if ``P`` does not divide both, or ``max_length`` if learned positions
        cannot cover the ``N = h w`` patches."""
        height, width, size = int(height), int(width), self.patch_size
        if height % size or width % size:
            divisors = [p for p in range(1, min(height, width) + 1) if height % p == 0 and width % p == 0]
            nearest = min(divisors, key=lambda p: (abs(p - size), -p))
            raise invalid("patch_size", f"a divisor of the image's height {height} and width {width} (the patches "
                          f"tile it), e.g. patch_size={nearest}", size)
        h, w = height // size, width // size
        needed = max(h, w) if self.grid_positions else h * w  # a learned position per row and column, or patch
        if self.positions == "learned" and needed > self.max_length:
            what = f"{needed} rows or columns of patches" if self.grid_positions else f"{needed} patches"
            raise invalid("max_length", f"at least the {what} of a {height}x{width} image in patches of {size}x{size} "
                          f"(one learned position each), e.g. max_length={needed}", self.max_length)
        return h, w

    def patches(self, images):
        """``x_p`` ``[B, N, P^2]``: the ``P x P`` patches of ``images`` ``uint8 [B, H, W]``, row-major over
        the grid, each flattened row-major, pixels in ``[0, 1]``."""
        height, width = images.shape[1], images.shape[2]
        h, w = self.grid_shape(height, width)
        size = self.patch_size
        x = ops.cast(images, self.compute_dtype) / PIXEL_MAX
        x = ops.reshape(x, (-1, h, size, w, size))  # [B, h, P, w, P]
        x = ops.transpose(x, (0, 1, 3, 2, 4))  # [B, h, w, P, P]
        return ops.reshape(x, (-1, h * w, size * size))

    def grid_position_embedding(self, h, w):
        """``E_pos`` ``[1, N, D]`` of 2-D positions: patch ``(r, c)``, row-major, gets ``[E_Y(r); E_X(c)]``,
        ``D/2`` features each (Dosovitskiy et al. 2021, appendix D.4), from ``positions``' layer."""
        half = self.embed_dim // 2
        if self.positions == "learned":  # the table's first D/2 columns embed the row, its last D/2 the column
            rows = self.source_positions(ops.zeros((1, h, self.embed_dim)))[..., :half]
            columns = self.source_positions(ops.zeros((1, w, self.embed_dim)))[..., half:]
        else:  # sinusoidal: the sinusoids of D/2 channels of the row index and of the column index
            rows = self.source_positions(ops.zeros((1, h, half)))
            columns = self.source_positions(ops.zeros((1, w, half)))
        rows = ops.broadcast_to(ops.expand_dims(rows, 2), (1, h, w, half))  # [1, h, w, D/2]: E_Y(r)
        columns = ops.broadcast_to(ops.expand_dims(columns, 1), (1, h, w, half))  # E_X(c)
        return ops.reshape(ops.concatenate([rows, columns], axis=-1), (1, h * w, self.embed_dim))

    def _encode(self, source, training=None):
        """``(z_L [B, N, D], mask [B, N] (all true), encoder maps [B, H, N, N] per layer)`` of the images."""
        z = self.patch_embedding(self.patches(source))  # x_p E
        if self.grid_positions:
            z = z + ops.cast(self.grid_position_embedding(*self.grid_shape(source.shape[1], source.shape[2])),
                             z.dtype)  # + E_pos, 2-D
        elif self.source_positions is not None:
            z = self.source_positions(z)  # + E_pos (learned or sinusoidal; the others act in attention)
        z = self.embedding_dropout(z, training=training)
        mask = ops.ones(ops.shape(z)[:2], "bool")
        z, maps = transformer.encoder_stack(self, z, mask, training=training)  # eq. 2-4: z_L (LN'd with norm_first)
        return z, mask, maps

    def encode(self, source, training=None):
        """The decoder's memory (``TransformerSeq2Seq``'s: the patches' encodings, their mask, each decoder
        layer's cross keys and values) and, with ``rollout``, ``R`` ``[B, N, N]`` of the encoder's maps."""
        z, mask, maps = self._encode(source, training=training)
        memory = self._memory(z, mask)
        if self.rollout:
            memory["rollout"] = rollout(maps)
        return memory

    def image_attention(self, weights, memory):
        """The attention over the image of cross-attention ``weights`` (``a`` ``[B, N]`` or ``[B, T, N]``):
        ``a R`` with ``rollout``, else ``a``."""
        if not self.rollout:
            return weights
        weights = ops.cast(weights, "float32")
        if len(weights.shape) == 2:
            return ops.squeeze(ops.matmul(ops.expand_dims(weights, 1), memory["rollout"]), 1)
        return ops.matmul(weights, memory["rollout"])

    def decode_step(self, token, state, memory, training=None):
        """``(logits [B, V], state, attention [B, N])``: the Transformer's step (``decode_features``, whose
        attention is ``a_t`` over the encoded patches, then ``output_logits``), its attention as
        ``image_attention``. Greedy and beam search and the SavedModel call this step."""
        features, state, weights = self.decode_features(token, state, memory, training=training)
        return self.output_logits(features, training=training), state, self.image_attention(weights, memory)

    def teacher_forced_features(self, source, target_in, training=None):
        """All target positions in parallel: ``(features [B, T, D], image_attention [B, T, N])``, the
        attention from the last decoder layer's cross-attention, heads averaged."""
        self.ensure_built()
        memory = self.encode(source, training=training)
        features, _, cross_maps, _ = self._decode(memory, target_in, training=training)
        return features, self.image_attention(ops.cast(ops.mean(cross_maps[-1], axis=1), "float32"), memory)

    def training_features(self, source, target_in, training=None):
        """What the training step's loss reads: the last decoder layer's output at the real target
        positions (``target_in != 0``), 0 at padding; no attention over the image is formed."""
        self.ensure_built()
        z, mask, _ = self._encode(source, training=training)
        features, _, _, _ = self._decode(self._memory(z, mask), target_in, training=training)
        real = ops.cast(ops.expand_dims(ops.not_equal(target_in, PAD_ID), -1), features.dtype)
        return features * real

    def attention_grids(self, images, target_in):
        """Teacher-forced attention over the image ``[B, T, h, w]``."""
        _, attention = self.teacher_forced_features(images, target_in, training=False)
        h, w = self.grid_shape(*images.shape[1:3])
        return ops.reshape(attention, (ops.shape(attention)[0], ops.shape(attention)[1], h, w))

    def attention_maps(self, inputs):
        """``TransformerSeq2Seq.attention_maps`` (``encoder``, ``self``, ``cross``: per layer, per head) and
        ``rollout`` ``[B, N, N]`` of the encoder's maps."""
        maps = super().attention_maps(inputs)
        return {**maps, "rollout": rollout(maps["encoder"])}

    def get_config(self):
        config = super().get_config()
        for key in ("source_vocab_size", "share_embeddings"):
            config.pop(key)
        config.update({"patch_size": self.patch_size, "rollout": self.rollout, "grid_positions": self.grid_positions})
        return config


@register_model("vision_transformer", task="image")
def vision_transformer(target_vocab_size, **kwargs):
    return VisionTransformer(target_vocab_size, name="vision_transformer", **kwargs)
