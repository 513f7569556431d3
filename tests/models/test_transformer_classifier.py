"""model=transformer_classifier (zoo.models.self_attention.transformer_classifier): the Transformer's
encoder layers, pooled over the real tokens, onto the classes; tiny sizes."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import zoo.models  # noqa: E402
from zoo.models.self_attention import transformer  # noqa: E402

TINY = {"embed_dim": 8, "intermediate_dim": 16, "num_layers": 2, "num_heads": 2, "dropout": 0.0, "max_length": 16}
VOCAB, CLASSES = 12, 10
TOKENS = np.array([[5, 6, 7, 8, 9, 0], [9, 4, 0, 0, 0, 0], [4, 5, 6, 7, 8, 11]], dtype="int32")


def make(**overrides):
    keras.utils.set_random_seed(0)
    return zoo.models.create("transformer_classifier", vocab_size=VOCAB, num_classes=CLASSES, **{**TINY, **overrides})


_MADE = {}


def made(**overrides):
    """``make(**overrides)``, built once per setting (the class defaults filled in) for the checks that
    only read the model (outputs, gradients, saving); a test that changes its weights calls ``make``."""
    key = repr(sorted({"positions": "sinusoidal", "pooling": "mean", **overrides}.items()))
    if key not in _MADE:
        _MADE[key] = make(**overrides).ensure_built()
    return _MADE[key]


@pytest.mark.parametrize("positions, pooling", [(p, "mean") for p in transformer.POSITIONS] + [("rotary", "cls")])
def test_logits_have_the_documented_shapes_and_ignore_padding(positions, pooling):
    model = made(positions=positions, pooling=pooling)
    logits = model.classify(TOKENS).numpy()
    assert logits.shape == (3, CLASSES) and np.isfinite(logits).all()
    padded = model.classify(np.pad(TOKENS, [[0, 0], [0, 3]])).numpy()  # more padding: the same answer
    np.testing.assert_allclose(padded, logits, atol=1e-5)
    loop = model(TOKENS).numpy()  # the training loop's form: a padding column, then the classes
    assert loop.shape == (3, 1, CLASSES + 1) and (loop[:, 0, 0] == -1e9).all()
    np.testing.assert_allclose(loop[:, 0, 1:], logits, atol=1e-6)
    maps = model.attention_maps(TOKENS)
    extra = pooling == "cls"
    assert len(maps) == 2 and tuple(maps[0].shape) == (3, 2, 6 + extra, 6 + extra)
    assert np.allclose(maps[0].numpy()[1, :, :, 2 + extra:], 0.0)  # padding keys get no weight


def test_mean_pooling_is_the_mean_of_the_encoder_outputs_over_the_real_tokens():
    model = made()
    x, mask, _ = model.encode(TOKENS)
    x, mask = x.numpy(), mask.numpy()
    pooled = np.stack([x[i][mask[i]].mean(0) for i in range(3)])
    kernel, bias = model.output_projection.get_weights()
    np.testing.assert_allclose(model.classify(TOKENS).numpy(), pooled @ kernel + bias, atol=1e-5)
    assert isinstance(model.encoder_layers[0], transformer._EncoderLayer)  # the Transformer's own layer


def test_training_steps_lower_the_loss_and_learn_a_rule():
    from zoo.training.losses import token_losses

    model = make(num_layers=1)
    labels = np.array([[5], [9], [4]]) + 1  # the loop's labels: class + 1 (the first token's class)
    optimizer = keras.optimizers.Adam(0.02)
    import tensorflow as tf

    @tf.function(autograph=False)
    def step():
        with tf.GradientTape() as tape:
            nll, mask = token_losses(labels, model(TOKENS, training=True))
            loss = tf.reduce_sum(nll * mask) / tf.reduce_sum(mask)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    losses = [float(step()) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]
    assert (model.classify(TOKENS).numpy().argmax(-1) == labels[:, 0] - 1).all()


@pytest.mark.parametrize("positions", ["sinusoidal", "rotary", "alibi"])
def test_the_fast_encoder_layer_gives_the_reference_logits_and_gradients(positions):
    import tensorflow as tf

    from zoo import kernels

    model = made(positions=positions)
    results = {}
    for mode in ("fast", "reference"):
        with kernels.using(mode), tf.GradientTape() as tape:
            logits = model.classify(TOKENS, training=True)
            loss = tf.reduce_sum(logits * tf.range(1.0, CLASSES + 1.0))
        results[mode] = [logits.numpy()] + [tf.convert_to_tensor(g).numpy()
                                            for g in tape.gradient(loss, model.trainable_variables)]
    for fast, reference in zip(results["fast"], results["reference"]):
        np.testing.assert_allclose(fast, reference, rtol=1e-5, atol=1e-5)

def test_keras_file_round_trip_gives_identical_outputs(tmp_path):
    model = made(pooling="cls", positions="learned")  # max_length=16: TINY's
    path = str(tmp_path / "classifier.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_allclose(loaded.classify(TOKENS).numpy(), model.classify(TOKENS).numpy(), atol=1e-6)


def test_bad_arguments_are_refused_with_the_name_and_value():
    with pytest.raises(ValueError, match="Received: pooling='max'"):
        make(pooling="max")
    with pytest.raises(ValueError, match="embed_dim"):
        make(embed_dim=9)


def every_layer_attends_with(model, attention):
    import zoo.attention

    assert all(type(layer.self_attention) is zoo.attention.ATTENTIONS.get(attention) for layer in model.encoder_layers)
    assert np.isfinite(model.classify(TOKENS).numpy()).all()


# memory_efficient: test_memory_efficient_attention_classifies_as_multi_head_does, on its one model
@pytest.mark.parametrize("attention", ["linformer", "linear", "performer", "differential"])
def test_model_attention_is_every_encoder_layers_self_attention(attention):
    model = made(attention=attention)
    every_layer_attends_with(model, attention)
    if attention == "linformer":  # sized for the model's longest input (and the [CLS] row)
        assert model.encoder_layers[0].self_attention.max_length == 16
        assert make(attention=attention, pooling="cls").encoder_layers[0].self_attention.max_length == 17


def test_memory_efficient_attention_classifies_as_multi_head_does():
    reference = made()
    blocked = make(attention="memory_efficient").ensure_built()
    every_layer_attends_with(blocked, "memory_efficient")  # as test_model_attention_is_every_..., its own weights
    blocked.set_weights(reference.get_weights())  # exact softmax attention over blocks: the same function
    np.testing.assert_allclose(blocked.classify(TOKENS).numpy(), reference.classify(TOKENS).numpy(), atol=1e-5)
