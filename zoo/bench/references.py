"""The in-run references: peers built from ``keras.layers`` as their authors build them.

- ``keras_transformer``: the keras.io "English-to-Spanish translation with a sequence-to-sequence
  Transformer" example (``TransformerEncoder``/``TransformerDecoder`` of
  ``keras.layers.MultiHeadAttention``, a ``Sequential`` FFN, post-norm, learned positions added to
  token embeddings), with its vocabulary sized to the data, ``num_layers`` blocks per side and the
  heads split as in the paper (``key_dim = d_model / heads``; the example uses ``key_dim = d_model``).
- ``tutorial_rnn``: the TensorFlow tutorial "Neural machine translation with attention": an
  ``Embedding(mask_zero=True)`` + ``Bidirectional(GRU, merge_mode="sum")`` encoder, a GRU decoder
  and ``CrossAttention`` = ``keras.layers.MultiHeadAttention(num_heads=1, key_dim=units)`` + ``Add``
  + ``LayerNormalization``, then ``Dense(vocab)``; ``rnn_layers`` GRUs per side.

Both take ``(source, target_in)`` and return logits ``[B, Tt, V]``, so the benchmark trains them
with the project's own step, on the same batches as our models.
"""

from __future__ import annotations

NAMES = ("keras_transformer", "tutorial_rnn")


def keras_transformer(source_vocab_size, target_vocab_size, embed_dim, intermediate_dim, num_heads, num_layers,
                      max_length=256, **_):
    import keras
    from keras import layers, ops

    class PositionalEmbedding(layers.Layer):
        def __init__(self, sequence_length, vocab_size, embed_dim, **kwargs):
            super().__init__(**kwargs)
            self.token_embeddings = layers.Embedding(vocab_size, embed_dim)
            self.position_embeddings = layers.Embedding(sequence_length, embed_dim)

        def call(self, inputs):
            positions = ops.arange(0, ops.shape(inputs)[-1], 1)
            return self.token_embeddings(inputs) + self.position_embeddings(positions)

    class TransformerEncoder(layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.attention = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim // num_heads)
            self.dense_proj = keras.Sequential([layers.Dense(intermediate_dim, activation="relu"),
                                                layers.Dense(embed_dim)])
            self.layernorm_1 = layers.LayerNormalization()
            self.layernorm_2 = layers.LayerNormalization()

        def call(self, inputs, padding_mask):
            attention_output = self.attention(query=inputs, value=inputs, key=inputs, attention_mask=padding_mask)
            proj_input = self.layernorm_1(inputs + attention_output)
            return self.layernorm_2(proj_input + self.dense_proj(proj_input))

    class TransformerDecoder(layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.attention_1 = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim // num_heads)
            self.attention_2 = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim // num_heads)
            self.dense_proj = keras.Sequential([layers.Dense(intermediate_dim, activation="relu"),
                                                layers.Dense(embed_dim)])
            self.layernorm_1 = layers.LayerNormalization()
            self.layernorm_2 = layers.LayerNormalization()
            self.layernorm_3 = layers.LayerNormalization()

        def call(self, inputs, encoder_outputs, self_mask, cross_mask):
            attention_output_1 = self.attention_1(query=inputs, value=inputs, key=inputs, attention_mask=self_mask)
            out_1 = self.layernorm_1(inputs + attention_output_1)
            attention_output_2 = self.attention_2(query=out_1, value=encoder_outputs, key=encoder_outputs,
                                                  attention_mask=cross_mask)
            out_2 = self.layernorm_2(out_1 + attention_output_2)
            return self.layernorm_3(out_2 + self.dense_proj(out_2))

    class KerasTransformer(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.source_embedding = PositionalEmbedding(max_length, source_vocab_size, embed_dim)
            self.target_embedding = PositionalEmbedding(max_length, target_vocab_size, embed_dim)
            self.encoders = [TransformerEncoder() for _ in range(num_layers)]
            self.decoders = [TransformerDecoder() for _ in range(num_layers)]
            self.output_dense = layers.Dense(target_vocab_size)

        def call(self, inputs, training=None):
            source, target_in = inputs
            source_mask = ops.not_equal(source, 0)
            target_mask = ops.not_equal(target_in, 0)
            length = ops.shape(target_in)[1]
            causal = ops.arange(length)[:, None] >= ops.arange(length)[None, :]
            x = self.source_embedding(source)
            padding = source_mask[:, None, :]
            for encoder in self.encoders:
                x = encoder(x, padding)
            y = self.target_embedding(target_in)
            self_mask = ops.logical_and(causal[None], target_mask[:, None, :])
            for decoder in self.decoders:
                y = decoder(y, x, self_mask, padding)
            return self.output_dense(y)

    return KerasTransformer(name="keras_transformer")


def tutorial_rnn(source_vocab_size, target_vocab_size, embed_dim, units, rnn_layers, **_):
    import keras
    from keras import layers

    class CrossAttention(layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.mha = layers.MultiHeadAttention(key_dim=units, num_heads=1)
            self.layernorm = layers.LayerNormalization()
            self.add = layers.Add()

        def call(self, x, context):
            attn_output = self.mha(query=x, value=context)
            return self.layernorm(self.add([x, attn_output]))

    class TutorialRNN(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.source_embedding = layers.Embedding(source_vocab_size, embed_dim, mask_zero=True)
            self.encoder_rnns = [layers.Bidirectional(merge_mode="sum", layer=layers.GRU(
                units, return_sequences=True, recurrent_initializer="glorot_uniform")) for _ in range(rnn_layers)]
            self.target_embedding = layers.Embedding(target_vocab_size, embed_dim, mask_zero=True)
            self.decoder_rnns = [layers.GRU(units, return_sequences=True, return_state=True,
                                            recurrent_initializer="glorot_uniform") for _ in range(rnn_layers)]
            self.attention = CrossAttention()
            self.output_layer = layers.Dense(target_vocab_size)

        def call(self, inputs, training=None):
            source, target_in = inputs
            context = self.source_embedding(source)
            for rnn in self.encoder_rnns:
                context = rnn(context)
            x = self.target_embedding(target_in)
            for rnn in self.decoder_rnns:
                x, _ = rnn(x)
            return self.output_layer(self.attention(x, context))

    return TutorialRNN(name="tutorial_rnn")


def create(name, source_vocab_size, target_vocab_size, sizes):
    """The reference ``name`` with the vocabulary sizes of the data and ``sizes`` (the bench size's
    ``reference`` block), built on a one-batch call."""
    import numpy as np

    builders = {"keras_transformer": keras_transformer, "tutorial_rnn": tutorial_rnn}
    if name not in builders:
        raise ValueError(f"Unknown reference '{name}'. Available: {', '.join(NAMES)}")
    model = builders[name](source_vocab_size, target_vocab_size, **dict(sizes))
    model((np.ones((1, 3), "int32"), np.ones((1, 2), "int32")))
    return model
