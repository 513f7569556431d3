"""Show, Attend and Tell (Xu et al. 2015): a CNN encoder's grid, an LSTM decoder with soft attention or
stochastic hard attention trained by REINFORCE."""

import numbers

import keras
from keras import ops

from zoo.attention.hard_attention import gumbel_noise, multinoulli
from zoo.checks import choice, invalid, non_negative_float, positive_int
from zoo.models import alignment
from zoo.models.encoder_decoder import Seq2SeqModel
from zoo.models.registry import register_model
from zoo.tokens import EOS_ID

PIXEL_MAX = 255.0  # images arrive as uint8 [B, H, W]: 0 background, 255 ink
ATTENTION_MODES = ("soft", "hard")  # sec. 4.2 deterministic soft, sec. 4.1 stochastic hard
# The declared rules, read by the validator without importing (zoo.catalog).
CONSTRAINTS = (
    {"rule": "one_of", "key": "attention_mode", "values": ATTENTION_MODES},
    {"rule": "at_least", "key": "entropy_weight", "min": 0},
    {"rule": "at_least", "key": "baseline_decay", "min": 0},
    {"rule": "at_most", "key": "baseline_decay", "max": 1},
    {"rule": "at_least", "key": "expectation_rate", "min": 0},
    {"rule": "at_most", "key": "expectation_rate", "max": 1},
)


@keras.saving.register_keras_serializable(package="zoo")
class ShowAttendTell(Seq2SeqModel):
    """A small CNN over the image; an LSTM decoder attending over its feature grid (soft or hard attention).

    **Encoder.** The image ``x`` (``uint8 [B, H, W]``, scaled to ``[0, 1]`` inside the model) passes
    ``conv_layers`` blocks of a 3x3 ``same`` convolution (ReLU; block ``k`` has ``filters * 2^k``
    channels) and a 2x2 max-pooling, so the grid is ``h = H // s``, ``w = W // s`` with stride
    ``s = 2 ** conv_layers`` (``grid_shape``). Its ``L = h w`` cells, row-major, are the annotation
    vectors ``a = {a_1, ..., a_L}``, ``a_i`` in ``R^D`` (``D = filters * 2^(conv_layers - 1)``), the
    memory the decoder attends over.

    **Decoder** (sec. 3.1.2 and 4.2.1), at output step ``t``:

    - ``e_ti = f_att(a_i, h_{t-1})``, ``alpha_t = softmax(e_t)`` (``model.attention``, any alignment
      attention, ``additive`` by default: the paper's MLP);
    - the gating scalar ``beta_t = sigmoid(f_beta(h_{t-1}))`` and the context
      ``z_t = beta_t sum_i alpha_ti a_i``;
    - ``i_t, f_t, o_t, g_t`` from ``[E y_{t-1}; h_{t-1}; z_t]``: an LSTM step on ``[E y_{t-1}; z_t]``;
    - the deep output layer, eq. 7: ``p(y_t | a, y_{<t}) = softmax(L_o(E y_{t-1} + L_h h_t + L_z z_t))``
      (``E`` the ``m = embed_dim`` embedding, ``L_h``, ``L_z`` into ``R^m``, ``L_o`` onto the vocabulary,
      dropout before ``L_o``);
    - ``c_0 = f_init,c(mean_i a_i)``, ``h_0 = f_init,h(mean_i a_i)`` (one ``tanh`` layer each).

    **Doubly stochastic attention** (eq. 14): the loss adds
    ``lambda sum_i (1 - sum_t alpha_ti)^2`` (``attention_penalty = lambda``; the sum over ``t`` runs
    over the real target steps, those whose input token is not padding), averaged over the batch, with
    ``self.add_loss`` in ``call``: the training loop adds ``model.losses`` to the token loss, as for the
    self-attentive reader's penalty. It pushes each cell's total attention over the string towards 1,
    so the decoder looks at every part of the image over the course of the string.

    **Stochastic hard attention** (sec. 4.1, ``attention_mode="hard"``). The same ``alpha_t``
    parameterises a location variable ``s_t ~ Multinoulli_L({alpha_ti})`` (eq. 8, drawn by the
    Gumbel-max trick, ``zoo.attention.hard_attention.multinoulli``), and the context is the one annotation
    vector drawn, ``z_t = beta_t sum_i s_ti a_i`` (eq. 9). Training maximises the variational lower bound
    ``L_s = sum_s p(s | a) log p(y | s, a)`` with the Monte Carlo estimate of its gradient (eq. 10-12),
    ``s~`` one sample per string:

    ``dL_s/dW ~ dlog p(y | s~, a)/dW + lambda_r (log p(y | s~, a) - b) dlog p(s~ | a)/dW
    + lambda_e dH[s~]/dW``

    with ``lambda_r = 1``, the moving-average baseline ``b_k = d b_{k-1} + (1 - d) log p(y | s~_k, a)``
    (``baseline_decay = d``, 0.9 in the paper; ``b`` the mean over the batch's sampled strings, kept in
    the non-trainable weight ``baseline``; the advantage of batch ``k`` uses ``b_{k-1}``) and the entropy
    ``H[s~] = sum_t -sum_i alpha_ti log alpha_ti`` (``entropy_weight = lambda_e``). The first term is the
    training loop's token loss (the sample enters ``z_t``; no gradient reaches ``alpha`` through it); the
    other two are ``self.add_loss`` of the surrogate (``reinforce_surrogate``)
    ``-(1/N) sum_n [ sg(R_n - b) sum_t log alpha_{t, s~_t} + lambda_e H_n ]``, ``R_n = log p(y_n | s~, a)``
    the string's log-likelihood under the teacher-forced logits (``sg``: stop-gradient), ``N`` the
    batch's real target tokens, the token loss's own normaliser, so the three terms keep eq. 12's ratios.
    As in sec. 4.1, with probability ``expectation_rate`` (0.5 in the paper) a training string uses the
    expected value instead, ``s~_t = alpha_t`` (the soft context, trained as the soft model, no REINFORCE
    term). At test time (``training`` false: validation, greedy and beam search, the export) the
    context is that expectation, ``z_t = beta_t sum_i alpha_ti a_i``, not a sample or the argmax
    location, so decoding is deterministic and the attention maps are the ``alpha_t`` drawn from.
    ``log p(y | s~, a)`` needs the gold outputs, which ``call`` rebuilds from ``target_in``
    (``<bos> y_1 .. y_T``, padded with 0): ``target_out = y_1 .. y_T <eos>`` (``target_output``).

    The ``Seq2SeqModel`` interface (``encode``, ``initial_state``, ``decode_features``,
    ``output_logits``) is that of the text decoders with the image as the source, so greedy and beam
    search work unchanged; the attention of a step is ``[B, L]``, of a string ``[B, T_out, L]``
    (``[B, T_out, h, w]`` after a reshape, for pictures and ``zoo.metrics.alignment``). Attention layers
    that take the previous step's weights (``location_aware``) get ``alpha_{t-1}`` in the state, those
    that take the query position (``local_m``) the step, as in ``bahdanau``.

    Shapes: ``B`` batch, ``T`` output steps, ``H`` = ``hidden_size``, ``V`` target vocabulary.

    Args:
        target_vocab_size: the output vocabulary (id 0 = padding).
        embed_dim: positive int ``m``, the token embedding and the deep output's width.
        hidden_size: positive int, the LSTM's units (``n`` in the paper).
        conv_layers: positive int, the convolution + pooling blocks (the grid's stride is ``2 ** conv_layers``).
        filters: positive int, the first block's channels (doubled at each further block).
        attention: name of a registered alignment attention (``zoo.attention.alignment_names()``).
        attention_options: dict of keyword arguments for that attention layer.
        attention_penalty: non-negative float ``lambda`` of the doubly stochastic penalty; 0 adds none.
        dropout: float in [0, 1), before ``L_o``.
        attention_mode: ``"soft"`` (deterministic, sec. 4.2) or ``"hard"`` (stochastic, sec. 4.1).
        entropy_weight: non-negative float ``lambda_e`` of the entropy bonus (hard mode).
        baseline_decay: float ``d`` in [0, 1], the moving-average baseline's decay (hard mode).
        expectation_rate: float in [0, 1], the share of training strings given the expected context
            instead of a sample (hard mode).

    Example:
        >>> import numpy as np
        >>> model = ShowAttendTell(14, embed_dim=8, hidden_size=12, conv_layers=2, filters=4)
        >>> images = np.zeros((2, 16, 24), "uint8")
        >>> tuple(model((images, np.array([[2, 5, 6], [2, 7, 0]]))).shape), model.grid_shape(16, 24)
        ((2, 3, 14), (4, 6))
        >>> hard = ShowAttendTell(14, embed_dim=8, hidden_size=12, conv_layers=2, filters=4, attention_mode="hard")
        >>> tuple(hard((images, np.array([[2, 5, 6], [2, 7, 0]])), training=True).shape), len(hard.losses)
        ((2, 3, 14), 2)

    References:
        Xu, Ba, Kiros, Cho, Courville, Salakhutdinov, Zemel, Bengio. Show, Attend and Tell: Neural Image
        Caption Generation with Visual Attention. ICML 2015.
    """

    def __init__(self, target_vocab_size, embed_dim=64, hidden_size=128, conv_layers=3, filters=16,
                 attention="additive", attention_options=None, attention_penalty=0.01, dropout=0.0,
                 attention_mode="soft", entropy_weight=0.01, baseline_decay=0.9, expectation_rate=0.5, **kwargs):
        super().__init__(**kwargs)
        self.target_vocab_size = positive_int("target_vocab_size", target_vocab_size)
        self.embed_dim = positive_int("embed_dim", embed_dim)
        self.hidden_size = positive_int("hidden_size", hidden_size)
        self.conv_layers = positive_int("conv_layers", conv_layers)
        self.filters = positive_int("filters", filters)
        self.channels = [self.filters * 2 ** k for k in range(self.conv_layers)]
        self.attention_name = attention
        self.attention_options = dict(attention_options or {})
        self.attention_penalty = non_negative_float("attention_penalty", attention_penalty)
        self.dropout = float(dropout)
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"Invalid dropout={dropout!r}: expected a float in [0, 1).")
        self.attention_mode = choice("attention_mode", attention_mode, ATTENTION_MODES)
        self.entropy_weight = non_negative_float("entropy_weight", entropy_weight)
        self.baseline_decay = _unit_float("baseline_decay", baseline_decay)
        self.expectation_rate = _unit_float("expectation_rate", expectation_rate)
        self.hard = self.attention_mode == "hard"
        if self.hard and attention == "hard":
            raise invalid("attention", "an attention giving soft weights with attention_mode='hard' (which samples "
                          "its own location; the 'hard' attention samples too)", attention)
        dtype = self.dtype_policy
        self.convolutions = [keras.layers.Conv2D(c, 3, padding="same", activation="relu", name=f"conv_{i}",
                                                 dtype=dtype) for i, c in enumerate(self.channels)]
        self.pooling = keras.layers.MaxPooling2D(2, name="pool", dtype=dtype)
        self.init_h = keras.layers.Dense(hidden_size, activation="tanh", name="init_h", dtype=dtype)
        self.init_c = keras.layers.Dense(hidden_size, activation="tanh", name="init_c", dtype=dtype)
        self.attention = alignment.create_alignment_attention("show_attend_tell", attention, self.attention_options,
                                                              dtype)
        self.gate = keras.layers.Dense(1, activation="sigmoid", name="f_beta", dtype=dtype)
        self.target_embedding = keras.layers.Embedding(target_vocab_size, embed_dim, name="target_embedding",
                                                       dtype=dtype)
        self.decoder_cell = keras.layers.LSTMCell(hidden_size, name="decoder_lstm", dtype=dtype)
        self.l_h = keras.layers.Dense(embed_dim, name="l_h", dtype=dtype)
        self.l_z = keras.layers.Dense(embed_dim, use_bias=False, name="l_z", dtype=dtype)
        self.output_dropout = keras.layers.Dropout(self.dropout, name="output_dropout", dtype=dtype)
        self.output_projection = keras.layers.Dense(target_vocab_size, name="l_o", dtype=dtype)
        self.groups_hypotheses = alignment.groups_hypotheses(self.attention)  # beam rows as their sentence's queries
        if self.hard and self.context_dim != self.memory_dim:
            raise invalid("attention", f"an attention whose context is sum_i alpha_i a_i (width {self.memory_dim}) "
                          "with attention_mode='hard'", attention)
        if self.hard:  # the state of the draws of s~ (a soft model's weights stay as they were)
            self.sample_seed = keras.random.SeedGenerator(name="location_seed")

    @property
    def memory_dim(self):
        """``D``, the width of an annotation vector."""
        return self.channels[-1]

    @property
    def stride(self):
        """Image pixels per grid cell along each axis: ``2 ** conv_layers``."""
        return 2 ** len(self.channels)

    def grid_shape(self, height, width):
        """``(h, w)``, the feature grid of an ``height x width`` image (each pooling floors the size)."""
        for _ in self.channels:
            height, width = height // 2, width // 2
        return int(height), int(width)

    def build(self, input_shape=None):
        channels_in = 1
        for conv in self.convolutions:
            conv.build((None, None, None, channels_in))
            channels_in = conv.filters
        for layer in (self.init_h, self.init_c):
            layer.build((None, self.memory_dim))
        self.attention.build(*alignment.step_shapes(self.hidden_size, self.memory_dim))  # h_{t-1}, a
        self.gate.build((None, self.hidden_size))
        self.target_embedding.build((None,))
        self.decoder_cell.build((None, self.embed_dim + self.context_dim))
        self.l_h.build((None, self.hidden_size))
        self.l_z.build((None, self.context_dim))
        self.output_projection.build((None, self.embed_dim))
        if self.hard:  # b, the moving average of log p(y | s~, a) (eq. 10)
            self.baseline = self.add_weight(shape=(), initializer="zeros", trainable=False, name="baseline")
        self.built = True

    @property
    def context_dim(self):
        """The width of ``z_t`` (``D`` for additive attention)."""
        return alignment.context_width(self.attention, self.hidden_size, self.memory_dim)

    @property
    def feature_size(self):
        """``[h_t; E y_{t-1}; z_t]``: what the deep output layer reads."""
        return self.hidden_size + self.embed_dim + self.context_dim

    def annotations(self, images, training=None):
        """``a``: ``[B, h, w, D]`` feature grid of ``images`` ``uint8 [B, H, W]``."""
        x = ops.expand_dims(ops.cast(images, self.compute_dtype), -1) / PIXEL_MAX
        for conv in self.convolutions:
            x = self.pooling(conv(x))
        return x

    def encode(self, source, training=None):
        grid = self.annotations(source, training=training)
        shape = ops.shape(grid)
        memory = ops.reshape(grid, (shape[0], shape[1] * shape[2], self.memory_dim))  # [B, L, D], row-major
        mask = ops.ones(ops.shape(memory)[:2], "bool")
        mean = ops.mean(memory, axis=1)
        return {"memory": memory, "memory_mask": mask, "keys": self.attention.prepare(memory),
                "initial_states": (self.init_h(mean), self.init_c(mean))}

    def initial_state(self, memory, max_length=None):
        return (*memory["initial_states"], *alignment.initial_extras(self.attention, memory))

    def decode_features(self, token, state, memory, training=None):
        return self._embedded_features(self.target_embedding(token), state, memory, training=training)

    def _embedded_features(self, embedded, state, memory, training=None):
        """One step from ``E y_{t-1}``: ``([h_t; E y_{t-1}; z_t], state, alpha_t [B, L])``."""
        return self._step(embedded, state, memory, training=training)[:3]

    def _step(self, embedded, state, memory, training=None, sample=None):
        """``_embedded_features`` plus ``s_t [B, L]``, the location weights ``z_t`` was made with.

        ``sample``: in hard mode's training, ``(noise [B, L], expected [B, 1])``, the Gumbel noise of
        ``s_t ~ Multinoulli(alpha_t)`` and 1 for the strings given the expectation ``s_t = alpha_t``;
        otherwise (soft mode, test time) ``s_t = alpha_t``.
        """
        (h, c), extra = state[:2], state[2:]
        context, weights = alignment.attend_step(self.attention, h, memory, training=training,
                                                 **alignment.extras_arguments(self.attention, extra))
        selection = weights
        if sample is not None:  # z_t = sum_i s_ti a_i, s_t one-hot (eq. 8-9) or alpha_t (the expectation)
            noise, expected = sample
            drawn = multinoulli(weights, noise)
            selection = expected * weights + (1.0 - expected) * ops.cast(drawn, weights.dtype)
            rows = ops.expand_dims(ops.cast(selection, memory["memory"].dtype), 1)  # [B, 1, L]
            context = ops.squeeze(ops.matmul(rows, memory["memory"]), 1)
        z = self.gate(h) * context  # beta_t sum_i s_ti a_i (soft: s_t = alpha_t)
        output, (h, c) = self.decoder_cell(ops.concatenate([embedded, z], axis=-1), [h, c], training=training)
        new_state = (h, c, *alignment.next_extras(self.attention, extra, weights))
        return ops.concatenate([output, embedded, z], axis=-1), new_state, weights, selection

    def output_logits(self, features, training=None):
        """``L_o(E y_{t-1} + L_h h_t + L_z z_t)`` of ``features = [h_t; E y_{t-1}; z_t]`` (eq. 7)."""
        h = features[..., :self.hidden_size]
        embedded = features[..., self.hidden_size:self.hidden_size + self.embed_dim]
        z = features[..., self.hidden_size + self.embed_dim:]
        deep = embedded + self.l_h(h) + self.l_z(z)
        return self.output_projection(self.output_dropout(deep, training=training))

    def teacher_forced_features(self, source, target_in, training=None):
        """``(features [B, T, F], attention [B, T, L])``: the step over the embedded target, scanned."""
        return self._teacher_forced(source, target_in, training=training)[:2]

    def sampling(self, training):
        """True where ``z_t`` is drawn: hard mode, training."""
        return self.hard and bool(training)

    def _teacher_forced(self, source, target_in, training=None):
        """``(features [B, T, F], alpha [B, T, L], s [B, T, L], expected [B])``; ``s`` is ``alpha``
        unless ``sampling(training)``, ``expected`` 1 for the strings given the expectation."""
        self.ensure_built()
        memory = self.encode(source, training=training)
        state = self.initial_state(memory)
        embedded = ops.swapaxes(self.target_embedding(target_in), 0, 1)  # [T, B, E]
        batch, cells = ops.shape(memory["memory"])[0], ops.shape(memory["memory"])[1]
        dtype = self.compute_dtype
        expected = ops.ones((batch,), "float32")
        sampling = self.sampling(training)
        if sampling:  # one string's locations, s~, drawn with its noise; some strings get the expectation
            noise = gumbel_noise((ops.shape(embedded)[0], batch, cells), "float32", self.sample_seed)  # [T, B, L]
            draw = keras.random.uniform((batch,), dtype="float32", seed=self.sample_seed)
            expected = ops.cast(draw < self.expectation_rate, "float32")
        zeros = ops.zeros((batch, cells), "float32")
        init = (state, ops.zeros((batch, self.feature_size), dtype), zeros, zeros)

        def step(carry, inputs):
            e, noise_t = inputs if sampling else (inputs, None)
            sample = (noise_t, ops.expand_dims(expected, -1)) if sampling else None
            features, new_state, weights, selection = self._step(e, carry[0], memory, training=training,
                                                                 sample=sample)
            new_carry = (new_state, ops.cast(features, dtype), ops.cast(weights, "float32"),
                         ops.cast(selection, "float32"))
            return new_carry, new_carry

        unroll = 32 if keras.backend.backend() == "tensorflow" else 1
        xs = (embedded, noise) if sampling else embedded
        _, (_, features, attention, selection) = ops.scan(step, init, xs, unroll=unroll)
        return (ops.transpose(features, (1, 0, 2)), ops.transpose(attention, (1, 0, 2)),
                ops.transpose(selection, (1, 0, 2)), expected)

    def doubly_stochastic_penalty(self, attention, target_in):
        """``lambda * mean_b sum_i (1 - sum_t alpha_ti)^2`` over the real steps (``target_in`` not 0)."""
        steps = ops.cast(ops.not_equal(target_in, 0), attention.dtype)  # [B, T]
        totals = ops.sum(attention * ops.expand_dims(steps, -1), axis=1)  # sum_t alpha_ti: [B, L]
        return ops.cast(self.attention_penalty, attention.dtype) * ops.mean(ops.sum(ops.square(1.0 - totals), -1))

    def call(self, inputs, training=None, return_features=False):
        """Teacher-forced logits ``[B, T, V]`` (or features ``[B, T, F]``); adds the penalty as a loss,
        and in hard mode's training the REINFORCE surrogate (``reinforce_surrogate``)."""
        source, target_in = inputs
        features, attention, selection, expected = self._teacher_forced(source, target_in, training=training)
        if self.attention_penalty > 0:
            self.add_loss(self.doubly_stochastic_penalty(attention, target_in))
        logits = None
        if self.sampling(training):
            logits = self.output_logits(features, training=training)
            self.add_loss(self.hard_attention_loss(logits, attention, selection, expected, target_in))
        if return_features:
            return features
        return self.output_logits(features, training=training) if logits is None else logits

    @staticmethod
    def target_output(target_in):
        """``y_1 .. y_T <eos>`` (0-padded) of ``target_in = <bos> y_1 .. y_T`` (0-padded): ``[B, T]``."""
        following = ops.concatenate([target_in[:, 1:], ops.zeros_like(target_in[:, :1])], axis=1)
        eos = ops.where(ops.not_equal(target_in, 0), ops.full_like(target_in, EOS_ID), ops.zeros_like(target_in))
        return ops.where(ops.not_equal(following, 0), following, eos)

    def hard_attention_loss(self, logits, attention, selection, expected, target_in):
        """The REINFORCE and entropy terms of eq. 12 for a teacher-forced batch, as a loss; updates ``b``.

        ``R_n = sum_t log p(y_t | s~, a)`` over the real steps (``logits [B, T, V]``, the gold outputs
        ``target_output(target_in)``); the advantage uses ``b_{k-1}``, then
        ``b_k = d b_{k-1} + (1 - d) mean_n R_n`` over the sampled strings (``expected`` 0). The loss's
        value is 0 (``x - sg(x)``) and its gradient that of ``x = reinforce_surrogate(...)``, so the loss
        the loop logs stays the token loss plus the penalty, comparable with the soft model's.
        """
        steps = ops.cast(ops.not_equal(target_in, 0), "float32")  # [B, T]
        target_out = self.target_output(target_in)
        log_p = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
        token_log_p = ops.take_along_axis(log_p, ops.expand_dims(target_out, -1), axis=-1)[..., 0]  # [B, T]
        reward = ops.stop_gradient(ops.sum(token_log_p * steps, axis=1))  # R_n: [B]
        sampled = 1.0 - expected
        baseline = ops.cast(self.baseline, "float32")
        loss = reinforce_surrogate(attention, selection, reward, baseline, steps, sampled, self.entropy_weight)
        count = ops.sum(sampled)
        batch_mean = ops.sum(reward * sampled) / ops.maximum(count, 1.0)
        decay = self.baseline_decay
        self.baseline.assign(ops.where(count > 0, decay * baseline + (1.0 - decay) * batch_mean, baseline))
        return loss - ops.stop_gradient(loss)  # value 0, gradient eq. 12's: the logged loss stays the token loss

    def attention_grids(self, images, target_in):
        """Teacher-forced attention ``[B, T, h, w]``."""
        _, attention = self.teacher_forced_features(images, target_in, training=False)
        h, w = self.grid_shape(*images.shape[1:3])
        return ops.reshape(attention, (ops.shape(attention)[0], ops.shape(attention)[1], h, w))

    def get_config(self):
        config = super().get_config()
        config.update({
            "target_vocab_size": self.target_vocab_size, "embed_dim": self.embed_dim,
            "hidden_size": self.hidden_size, "conv_layers": self.conv_layers, "filters": self.filters, "attention": self.attention_name,
            "attention_options": self.attention_options, "attention_penalty": self.attention_penalty,
            "dropout": self.dropout, "attention_mode": self.attention_mode, "entropy_weight": self.entropy_weight,
            "baseline_decay": self.baseline_decay, "expectation_rate": self.expectation_rate,
        })
        return config


def _unit_float(name, value):
    """``float(value)`` if it is a number in [0, 1], else raises naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= float(value) <= 1.0:
        raise invalid(name, "a number in [0, 1]", value)
    return float(value)


def reinforce_surrogate(weights, selection, reward, baseline, steps, sampled, entropy_weight):
    """The loss whose gradient is minus eq. 12's REINFORCE and entropy terms (Xu et al. 2015, sec. 4.1).

    ``-(1/N) sum_n [ sampled_n sg(R_n - b) sum_t steps_nt log alpha_{n,t,s~_t}
    + lambda_e sum_t steps_nt H(alpha_nt) ]``, ``H(alpha) = -sum_i alpha_i log alpha_i``,
    ``N = sum steps`` (the token loss's normaliser). Its gradient with respect to the scores ``e_nt``
    of ``alpha_nt = softmax(e_nt)`` is
    ``-(1/N) [ sampled_n (R_n - b)(s~_nt - alpha_nt) - lambda_e alpha_nt (log alpha_nt + H(alpha_nt)) ]``
    on a real step.

    Args:
        weights: ``alpha [B, T, L]``, the attention distributions (differentiable).
        selection: ``s~ [B, T, L]``, one-hot locations drawn (rows where ``sampled`` is 0 are ignored).
        reward: ``R [B]``, ``log p(y | s~, a)`` of each string.
        baseline: the scalar ``b``.
        steps: ``[B, T]``, 1 on the real target steps.
        sampled: ``[B]``, 1 for the strings whose locations were drawn.
        entropy_weight: ``lambda_e``.

    Returns:
        The scalar loss.
    """
    weights = ops.cast(weights, "float32")
    log_alpha = ops.log(ops.maximum(weights, 1e-30))
    log_p_s = ops.sum(ops.stop_gradient(ops.cast(selection, "float32")) * log_alpha, axis=-1)  # log alpha_{t,s~}
    entropy = -ops.sum(weights * log_alpha, axis=-1)  # H(alpha_t): [B, T]
    advantage = ops.stop_gradient(reward - baseline) * sampled  # [B]
    tokens = ops.maximum(ops.sum(steps), 1.0)
    per_string = advantage * ops.sum(log_p_s * steps, axis=1) + entropy_weight * ops.sum(entropy * steps, axis=1)
    return -ops.sum(per_string) / tokens


@register_model("show_attend_tell", task="image")
def show_attend_tell(target_vocab_size, **kwargs):
    return ShowAttendTell(target_vocab_size, name="show_attend_tell", **kwargs)
