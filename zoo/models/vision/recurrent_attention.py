"""The recurrent attention model (Mnih et al. 2014; several objects: Ba et al. 2015): a glimpse sensor at
locations chosen by a learned Gaussian policy trained with REINFORCE, an LSTM core emitting one digit
every few glimpses."""

import keras
from keras import ops

from zoo.checks import positive_float, positive_int
from zoo.models.encoder_decoder import Seq2SeqModel
from zoo.models.registry import register_model
from zoo.models.vision.show_attend_tell import ShowAttendTell

PIXEL_MAX = 255.0  # images arrive as uint8 [B, H, W]: 0 background, 255 ink
# The declared rules, read by the validator without importing (zoo.catalog).
CONSTRAINTS = (
    {"rule": "at_least", "key": "glimpse_size", "min": 1, "integer": True},
    {"rule": "at_least", "key": "scales", "min": 1, "integer": True},
    {"rule": "at_least", "key": "glimpses_per_digit", "min": 1, "integer": True},
    {"rule": "above", "key": "location_std", "min": 0},
    {"rule": "at_least", "key": "map_stride", "min": 1, "integer": True},
    {"rule": "at_least", "key": "context_rows", "min": 1, "integer": True},
    {"rule": "at_least", "key": "context_cols", "min": 1, "integer": True},
)


@keras.saving.register_keras_serializable(package="zoo")
class RecurrentAttention(Seq2SeqModel):
    """Glimpses at learned locations, an LSTM core, one digit per ``N`` glimpses (Mnih et al. 2014, Ba et al. 2015).

    **Locations.** ``l = (l_x, l_y)`` in ``[-1, 1]^2``, ``(-1, -1)`` the image's top left corner and
    ``(1, 1)`` its bottom right: the centre in pixels is ``c = ((l_x + 1) W / 2, (l_y + 1) H / 2)``.

    **Glimpse sensor** ``rho(x, l)`` (Mnih et al. sec. 3, "retina"): ``scales = k`` square patches
    centred at ``c``, the first ``g x g`` pixels (``glimpse_size = g``), each next twice as wide, every
    patch resized to ``g x g`` by averaging its ``2^s x 2^s`` blocks, concatenated: ``[B, k g^2]``.
    Patch ``s`` (side ``g 2^s``, top left corner ``round(c - g 2^s / 2)``) is ``A_y X A_x^T`` with the
    averaging matrices ``A [B, g, H or W]``, ``A_ip = 2^-s`` where pixel ``p`` falls in the patch's
    ``i``-th block (``glimpse_sensor``): pixels outside the image are zeros (zero padding). ``l`` is
    not differentiated through the crop: the policy learns it by REINFORCE.

    **Glimpse network** ``f_g``: ``h_g = ReLU(Linear(rho))``, ``h_l = ReLU(Linear(l))``,
    ``g_t = ReLU(Linear(h_g) + Linear(h_l))`` (``glimpse_units`` wide each).

    **Core** ``f_h``: an LSTM, ``h_t = f_h(h_{t-1}, [g_t; E y_{j-1}])``, its input the glimpse and the
    embedding of the previous digit (Ba et al.'s multi-object reading: the decoder input, so that greedy
    and beam search, ``zoo.decoding``, read strings from it as from any ``Seq2SeqModel``).

    **Context network** (Ba et al. sec. 3.1): ``h_0, c_0 = tanh(Linear(x_coarse))``, ``x_coarse`` the
    image resized to ``context_rows x context_cols`` by averaging (``resize``): where to look first.

    **Location network** ``f_l``: ``l_t ~ N(mu_t, sigma^2 I)``, ``mu_t = tanh(Linear(h_t))``
    (``location_std = sigma``); at inference (``training`` false: validation, greedy and beam search,
    the export) ``l_t = mu_t``, so decoding is deterministic. The sensor sees ``clip(l_t, -1, 1)``
    (the clip is part of the environment: the policy's action is the unclipped ``l_t``). As in the
    paper, the policy gradient reaches every parameter ``mu_t`` depends on (the core, the glimpse and
    context networks: they learn to hold where to look next), the cross-entropy every parameter the
    digits depend on.

    **Emission** (Ba et al. sec. 3): output step ``j`` (digit ``y_j``) takes ``N = glimpses_per_digit``
    glimpses, ``l_{j,1..N}``, each drawn from the state before it (the first from the previous digit's
    last state, or ``h_0``), then ``p(y_j | ...) = softmax(Linear(h_{j,N}))``.

    **Hybrid loss** (Mnih et al. sec. 3, eq. 2; Ba et al. sec. 4): the training loop's cross-entropy of
    the digits, plus REINFORCE for the locations with a *learned* baseline ``b = f_b(sg(h))`` (the
    paper's ``b_t = E[R_t]``, trained by ``(R - b)^2``):

    ``L_rl = -(1/M) sum_n sum_j sum_i sg(R_nj - b_nji) log pi(l_nji | mu_nji) + (1/M) sum (R_nj - b_nji)^2``

    ``M`` the batch's real target tokens (the token loss's normaliser), ``log pi(l | mu) =
    -||l - mu||^2 / (2 sigma^2)`` (+ a constant), ``R_nj = sum_{j' >= j} [argmax p(y_j') = y_j']`` the
    correct outputs (digits and ``<eos>``, under teacher forcing) from step ``j`` on: the reward of the
    glimpses that can still change them (``reinforce_loss``). Added with ``self.add_loss`` as
    ``L_rl - sg(L_rl)`` (value 0), so the logged loss stays the cross-entropy. A fixed ``sigma`` gives
    a constant policy entropy: no entropy bonus.

    **Attention map** (``glimpse_map``): per output digit, its ``N`` glimpses' finest patches (the
    ``g x g`` boxes) rendered onto the ``h x w`` grid (``grid_shape``, cells of ``map_stride`` pixels):
    each cell weighs its overlap in pixels with each box, summed over the glimpses, normalised to sum
    1, so ``zoo.metrics.alignment`` measures whether the glimpses land on the digit read. The attention
    of a step is ``[B, h w]`` (row-major), of a string ``[B, T_out, h w]``.

    Shapes: ``B`` batch, ``T`` output steps, ``V`` target vocabulary, ``H x W`` the image.

    Args:
        target_vocab_size: the output vocabulary (id 0 = padding).
        embed_dim: positive int, the previous digit's embedding.
        hidden_size: positive int, the LSTM core's units.
        glimpse_size: positive int ``g``, the finest patch's side and every patch's resized side.
        scales: positive int ``k``, the patches per glimpse (sides ``g, 2g, ..., 2^(k-1) g``).
        glimpse_units: positive int, the width of ``h_g``, ``h_l`` and ``g_t``.
        glimpses_per_digit: positive int ``N``.
        location_std: positive float ``sigma``, the policy's standard deviation (in ``[-1, 1]`` units).
        map_stride: positive int, image pixels per attention-map cell along each axis.
        context_rows: positive int, the context network's coarse image rows.
        context_cols: positive int, its columns.

    Example:
        >>> import numpy as np
        >>> model = RecurrentAttention(14, embed_dim=4, hidden_size=8, glimpse_size=4, scales=2,
        ...                            glimpse_units=8, context_rows=2, context_cols=4)
        >>> images = np.zeros((2, 16, 32), "uint8")
        >>> tuple(model((images, np.array([[2, 5, 6], [2, 7, 0]]))).shape), model.grid_shape(16, 32)
        ((2, 3, 14), (4, 8))
        >>> _ = model((images, np.array([[2, 5, 6], [2, 7, 0]])), training=True)
        >>> len(model.losses)
        1

    References:
        Mnih, Heess, Graves, Kavukcuoglu. Recurrent Models of Visual Attention. NIPS 2014.
        Ba, Mnih, Kavukcuoglu. Multiple Object Recognition with Visual Attention. ICLR 2015.
    """

    def __init__(self, target_vocab_size, embed_dim=16, hidden_size=128, glimpse_size=8, scales=3,
                 glimpse_units=64, glimpses_per_digit=2, location_std=0.1, map_stride=4, context_rows=4,
                 context_cols=20, **kwargs):
        super().__init__(**kwargs)
        self.target_vocab_size = positive_int("target_vocab_size", target_vocab_size)
        self.embed_dim = positive_int("embed_dim", embed_dim)
        self.hidden_size = positive_int("hidden_size", hidden_size)
        self.glimpse_size = positive_int("glimpse_size", glimpse_size)
        self.scales = positive_int("scales", scales)
        self.glimpse_units = positive_int("glimpse_units", glimpse_units)
        self.glimpses_per_digit = positive_int("glimpses_per_digit", glimpses_per_digit)
        self.location_std = positive_float("location_std", location_std)
        self.map_stride = positive_int("map_stride", map_stride)
        self.context_rows = positive_int("context_rows", context_rows)
        self.context_cols = positive_int("context_cols", context_cols)
        dtype = self.dtype_policy
        units = self.glimpse_units
        self.what = keras.layers.Dense(units, activation="relu", name="h_g", dtype=dtype)  # h_g = ReLU(Linear(rho))
        self.where = keras.layers.Dense(units, activation="relu", name="h_l", dtype=dtype)  # h_l = ReLU(Linear(l))
        self.glimpse_what = keras.layers.Dense(units, name="g_what", dtype=dtype)
        self.glimpse_where = keras.layers.Dense(units, use_bias=False, name="g_where", dtype=dtype)
        self.context_h = keras.layers.Dense(hidden_size, activation="tanh", name="context_h", dtype=dtype)
        self.context_c = keras.layers.Dense(hidden_size, activation="tanh", name="context_c", dtype=dtype)
        self.target_embedding = keras.layers.Embedding(target_vocab_size, embed_dim, name="target_embedding",
                                                       dtype=dtype)
        self.core = keras.layers.LSTMCell(hidden_size, name="core_lstm", dtype=dtype)
        self.location = keras.layers.Dense(2, activation="tanh", name="f_l", dtype=dtype)
        self.baseline = keras.layers.Dense(1, name="f_b", dtype=dtype)
        self.classifier = keras.layers.Dense(target_vocab_size, name="f_y", dtype=dtype)
        self.sample_seed = keras.random.SeedGenerator(name="location_seed")

    def build(self, input_shape=None):
        self.what.build((None, self.scales * self.glimpse_size ** 2))
        self.where.build((None, 2))
        self.glimpse_what.build((None, self.glimpse_units))
        self.glimpse_where.build((None, self.glimpse_units))
        for layer in (self.context_h, self.context_c):
            layer.build((None, self.context_rows * self.context_cols))
        self.target_embedding.build((None,))
        self.core.build((None, self.glimpse_units + self.embed_dim))
        for layer in (self.location, self.baseline, self.classifier):
            layer.build((None, self.hidden_size))
        self.built = True

    def grid_shape(self, height, width):
        """``(h, w)``, the attention map's grid of an ``height x width`` image: cells of ``map_stride`` pixels."""
        return max(int(height) // self.map_stride, 1), max(int(width) // self.map_stride, 1)

    @property
    def feature_size(self):
        """``h_{j,N}``, the core state a digit is emitted from."""
        return self.hidden_size

    # -- the glimpse sensor -------------------------------------------------------------------------

    @staticmethod
    def centre(location, height, width):
        """Pixel coordinates ``(c_x, c_y)`` ``[B, 2]`` of ``l`` in ``[-1, 1]^2``."""
        size = ops.cast(ops.stack([width, height]), location.dtype)
        return (location + 1.0) * size / 2.0

    @staticmethod
    def block_average(start, blocks, factor, size, dtype):
        """``A [B, blocks, size]``: row ``i`` averages pixels ``start + i factor .. start + (i+1) factor - 1``
        (``start [B]`` integer-valued); pixels past ``[0, size)`` are simply absent (zeros)."""
        pixel = ops.cast(ops.arange(size), dtype)[None, None, :]
        first = ops.expand_dims(start, -1) + ops.cast(ops.arange(blocks) * factor, dtype)[None, :]  # [B, blocks]
        offset = pixel - ops.expand_dims(first, -1)
        inside = ops.logical_and(offset >= 0, offset < factor)
        return ops.where(inside, ops.cast(1.0 / factor, dtype), ops.cast(0.0, dtype))

    def glimpse_sensor(self, image, location):
        """``rho(x, l)``: ``[B, k g^2]``, the ``k`` patches at ``l`` (``[B, 2]``) of ``image`` ``[B, H, W]``
        (float), each ``A_y X A_x^T``, ``g x g``, flattened row-major and concatenated finest first."""
        height, width = ops.shape(image)[1], ops.shape(image)[2]
        centre = ops.stop_gradient(self.centre(location, height, width))
        g = self.glimpse_size
        patches = []
        for s in range(self.scales):
            factor = 2 ** s
            corner = ops.floor(centre - g * factor / 2.0 + 0.5)  # round(c - side / 2): [B, 2] (x, y)
            rows = self.block_average(corner[:, 1], g, factor, height, image.dtype)  # A_y [B, g, H]
            cols = self.block_average(corner[:, 0], g, factor, width, image.dtype)  # A_x [B, g, W]
            patch = ops.matmul(ops.matmul(rows, image), ops.swapaxes(cols, 1, 2))  # [B, g, g]
            patches.append(ops.reshape(patch, (-1, g * g)))
        return ops.concatenate(patches, axis=-1)

    def resize(self, image, rows, cols):
        """``image`` ``[B, H, W]`` averaged onto ``rows x cols`` cells (cell ``i`` holds rows
        ``floor(i H / rows) .. floor((i+1) H / rows) - 1``): ``[B, rows, cols]``."""
        def average(size, cells):
            cell = ops.floor(ops.cast(ops.arange(size), "float32") * cells / ops.cast(size, "float32"))
            member = ops.cast(ops.equal(ops.arange(cells, dtype="float32")[:, None], cell[None, :]), image.dtype)
            return member / ops.maximum(ops.sum(member, axis=1, keepdims=True), 1.0)  # [cells, size]

        height, width = ops.shape(image)[1], ops.shape(image)[2]
        a_y, a_x = average(height, rows), average(width, cols)
        return ops.einsum("ih,bhw,jw->bij", a_y, image, a_x)

    def glimpse_network(self, glimpse, location):
        """``g_t = ReLU(Linear(h_g) + Linear(h_l))``, ``h_g = ReLU(Linear(rho))``, ``h_l = ReLU(Linear(l))``."""
        return ops.relu(self.glimpse_what(self.what(glimpse)) + self.glimpse_where(self.where(location)))

    def glimpse_map(self, locations, height, width):
        """The attention map ``[B, h w]`` of the glimpses at ``locations [B, N, 2]``: each finest patch's
        ``g x g`` box, each cell weighted by its overlap with it in pixels, summed over the ``N``,
        normalised to sum 1 (row-major cells, ``grid_shape(H, W)``)."""
        rows, cols = self.grid_shape(height, width)
        g = float(self.glimpse_size)
        corner = ops.floor(self.centre(locations, height, width) - g / 2.0 + 0.5)  # [B, N, 2]

        def overlap(start, size, cells):  # [B, N, cells]: |[start, start + g) & [e_i, e_{i+1})|
            edges = ops.cast(ops.arange(cells + 1), "float32") * (float(size) / cells)
            low = ops.maximum(ops.expand_dims(start, -1), edges[None, None, :-1])
            high = ops.minimum(ops.expand_dims(start, -1) + g, edges[None, None, 1:])
            return ops.maximum(high - low, 0.0)

        weights = ops.einsum("bni,bnj->bij", overlap(corner[..., 1], height, rows), overlap(corner[..., 0], width, cols))
        weights = ops.reshape(weights, (ops.shape(weights)[0], rows * cols))
        return weights / ops.maximum(ops.sum(weights, axis=-1, keepdims=True), 1e-12)

    # -- the Seq2SeqModel interface -----------------------------------------------------------------

    def encode(self, source, training=None):
        image = ops.cast(source, self.compute_dtype) / PIXEL_MAX
        height, width = self.grid_shape(image.shape[1], image.shape[2])  # H, W static (the export's signature)
        coarse = ops.reshape(self.resize(image, self.context_rows, self.context_cols),
                             (-1, self.context_rows * self.context_cols))
        return {"image": image, "memory_mask": ops.ones((ops.shape(image)[0], height * width), "bool"),
                "initial_states": (self.context_h(coarse), self.context_c(coarse))}

    def initial_state(self, memory, max_length=None):
        return tuple(memory["initial_states"])

    def decode_features(self, token, state, memory, training=None):
        features, state, attention = self._digit_step(self.target_embedding(token), state, memory,
                                                      training=training)[:3]
        return features, state, attention

    def _digit_step(self, embedded, state, memory, training=None, noise=None):
        """One output step, ``N`` glimpses: ``(h [B, H], state, attention [B, h w], l [B, N, 2],
        mu [B, N, 2], b [B, N])``. ``noise [B, N, 2]`` (training): ``l = mu + sigma noise``, else ``l = mu``."""
        h, c = state
        image = memory["image"]
        locations, means, baselines = [], [], []
        for i in range(self.glimpses_per_digit):
            mean = self.location(h)  # mu = tanh(f_l(h))
            baselines.append(self.baseline(ops.stop_gradient(h))[:, 0])  # b = f_b(sg(h)): trains f_b only
            action = mean if noise is None else mean + self.location_std * noise[:, i]
            action = ops.stop_gradient(action)
            seen = ops.clip(action, -1.0, 1.0)
            glimpse = self.glimpse_network(self.glimpse_sensor(image, seen), seen)
            _, (h, c) = self.core(ops.concatenate([glimpse, embedded], axis=-1), [h, c], training=training)
            locations.append(action)
            means.append(mean)
        locations, means = ops.stack(locations, axis=1), ops.stack(means, axis=1)
        attention = self.glimpse_map(ops.clip(locations, -1.0, 1.0), image.shape[1], image.shape[2])
        return h, (h, c), attention, locations, means, ops.stack(baselines, axis=1)

    def output_logits(self, features, training=None):
        """``Linear(h_{j,N})``: the digit's logits ``[..., V]``."""
        return self.classifier(features)

    def teacher_forced_features(self, source, target_in, training=None):
        """``(features [B, T, H], attention [B, T, h w])``, the digit steps over the embedded target."""
        return self._teacher_forced(source, target_in, training=training)[:2]

    def _teacher_forced(self, source, target_in, training=None):
        """``(features, attention, l [B, T, N, 2], mu [B, T, N, 2], b [B, T, N])`` of teacher forcing;
        in training the locations are drawn from the policy."""
        self.ensure_built()
        memory = self.encode(source, training=training)
        state = self.initial_state(memory)
        embedded = ops.swapaxes(self.target_embedding(target_in), 0, 1)  # [T, B, E]
        steps, batch = ops.shape(embedded)[0], ops.shape(embedded)[1]
        sampling = bool(training)
        n, dtype = self.glimpses_per_digit, self.compute_dtype
        noise = keras.random.normal((steps, batch, n, 2), dtype=dtype, seed=self.sample_seed) if sampling else None
        cells = ops.shape(memory["memory_mask"])[1]
        init = (state, ops.zeros((batch, self.hidden_size), dtype), ops.zeros((batch, cells), dtype),
                ops.zeros((batch, n, 2), dtype), ops.zeros((batch, n, 2), dtype), ops.zeros((batch, n), dtype))

        def step(carry, inputs):
            e, noise_t = inputs if sampling else (inputs, None)
            out = self._digit_step(e, carry[0], memory, training=training, noise=noise_t)
            new_carry = (out[1], *(ops.cast(x, dtype) for x in (out[0], *out[2:])))
            return new_carry, new_carry

        unroll = 32 if keras.backend.backend() == "tensorflow" else 1
        _, (_, *outputs) = ops.scan(step, init, (embedded, noise) if sampling else embedded, unroll=unroll)
        return tuple(ops.swapaxes(x, 0, 1) for x in outputs)

    def call(self, inputs, training=None, return_features=False):
        """Teacher-forced logits ``[B, T, V]`` (or features ``[B, T, H]``); in training adds the
        REINFORCE loss of the locations drawn (``reinforce_loss``)."""
        source, target_in = inputs
        features, _, locations, means, baselines = self._teacher_forced(source, target_in, training=training)
        logits = self.output_logits(features, training=training)
        if training:
            reward = correct_from(logits, ShowAttendTell.target_output(target_in), target_in)
            steps = ops.cast(ops.not_equal(target_in, 0), "float32")
            loss = reinforce_loss(locations, means, baselines, reward, steps, self.location_std)
            self.add_loss(loss - ops.stop_gradient(loss))  # value 0, gradient L_rl's: the logged loss stays the CE
        return features if return_features else logits

    # Teacher-forced glimpse maps [B, T, h, w] (policy means): show_attend_tell's, over this model's grid.
    attention_grids = ShowAttendTell.attention_grids

    def get_config(self):
        config = super().get_config()
        config.update({
            "target_vocab_size": self.target_vocab_size, "embed_dim": self.embed_dim,
            "hidden_size": self.hidden_size, "glimpse_size": self.glimpse_size, "scales": self.scales,
            "glimpse_units": self.glimpse_units, "glimpses_per_digit": self.glimpses_per_digit,
            "location_std": self.location_std, "map_stride": self.map_stride,
            "context_rows": self.context_rows, "context_cols": self.context_cols,
        })
        return config


def correct_from(logits, target_out, target_in):
    """``R [B, T]``: the correct outputs (``argmax logits = target_out``) from each real step on,
    ``R_j = sum_{j' >= j} steps_j' [argmax p(y_j') = y_j']`` (0 on padding)."""
    steps = ops.cast(ops.not_equal(target_in, 0), "float32")
    hit = ops.cast(ops.equal(ops.argmax(logits, axis=-1), ops.cast(target_out, "int32")), "float32") * steps
    to_go = ops.flip(ops.cumsum(ops.flip(hit, axis=1), axis=1), axis=1)
    return ops.stop_gradient(to_go * steps)


def reinforce_loss(locations, means, baselines, reward, steps, sigma):
    """``L_rl``: REINFORCE for the Gaussian policy with a learned baseline (Mnih et al. 2014, eq. 2).

    ``-(1/M) sum_{n,j,i} steps_nj sg(R_nj - b_nji) log pi(l_nji | mu_nji) + (1/M) sum steps_nj (R_nj - b_nji)^2``,
    ``log pi(l | mu) = -||l - mu||^2 / (2 sigma^2)``, ``M = sum steps``. Its gradient with respect to
    ``mu`` is ``-(1/M) steps (R - b) (l - mu) / sigma^2``: gradient descent moves ``mu`` towards the
    location drawn when the reward beat the baseline, away from it when it fell short, not at all
    when they are equal; the baseline moves towards ``R``.

    Args:
        locations: ``l [B, T, N, 2]``, the locations drawn (no gradient).
        means: ``mu [B, T, N, 2]``, the policy's means (differentiable).
        baselines: ``b [B, T, N]`` (differentiable).
        reward: ``R [B, T]``.
        steps: ``[B, T]``, 1 on the real target steps.
        sigma: the policy's standard deviation.

    Returns:
        The scalar loss.
    """
    means, baselines = ops.cast(means, "float32"), ops.cast(baselines, "float32")
    log_pi = -ops.sum(ops.square(ops.stop_gradient(ops.cast(locations, "float32")) - means), axis=-1) / (
        2.0 * sigma ** 2)  # [B, T, N]
    advantage = ops.expand_dims(reward, -1) - baselines  # R - b: [B, T, N]
    real = ops.expand_dims(steps, -1)
    tokens = ops.maximum(ops.sum(steps), 1.0)
    policy = -ops.sum(real * ops.stop_gradient(advantage) * log_pi) / tokens
    return policy + ops.sum(real * ops.square(advantage)) / tokens


@register_model("recurrent_attention", task="image")
def recurrent_attention(target_vocab_size, **kwargs):
    return RecurrentAttention(target_vocab_size, name="recurrent_attention", **kwargs)

