"""Forward and backward pass of every registered model (sequence, story QA, classification, images,
speech, kernel regression) on the current Keras backend, at tiny sizes: ``KERAS_BACKEND=jax python scripts/backend_check.py`` shows the reference path
(plain keras.ops) runs off TensorFlow. Prints one line per model: the loss before and after 3 steps."""

import os
import sys

import numpy as np

os.environ.setdefault("ZOO_KERNELS", "reference")

import keras  # noqa: E402

import zoo.models  # noqa: E402

SEQ2SEQ = {
    "bahdanau": {"embed_dim": 8, "hidden_size": 12},
    "luong": {"embed_dim": 8, "hidden_size": 12},
    "seq2seq": {"embed_dim": 8, "hidden_size": 12},
    "transformer": {"embed_dim": 8, "intermediate_dim": 16, "num_layers": 2, "num_heads": 2},
}
QA = {
    "memory_network": {"embed_dim": 8, "hops": 2},
    "aoa_reader": {"embed_dim": 8, "hidden_size": 6},
    "coattention_reader": {"embed_dim": 8, "hidden_size": 6, "units": 5},
    "self_attentive_reader": {"embed_dim": 8, "hidden_size": 6, "units": 5, "hops": 3, "mlp_units": 7},
    "relation_reader": {"embed_dim": 8, "hidden_size": 6, "mlp_units": 7},
}
SOURCE = np.array([[5, 6, 7, 8, 3, 0, 0], [9, 4, 3, 0, 0, 0, 0], [4, 5, 6, 7, 8, 9, 3]], dtype="int32")
TARGET_IN = np.array([[2, 5, 6, 7, 0], [2, 8, 0, 0, 0], [2, 9, 4, 5, 6]], dtype="int32")
TARGET_OUT = np.array([[5, 6, 7, 3, 0], [8, 3, 0, 0, 0], [9, 4, 5, 6, 3]], dtype="int32")
STORY = np.array([[[5, 6, 7, 8, 0], [9, 10, 11, 0, 0], [5, 12, 7, 13, 0], [14, 6, 7, 8, 15]],
                  [[9, 6, 7, 16, 0], [5, 4, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]], dtype="int32")
QUESTION = np.array([[4, 5, 6], [4, 9, 0]], dtype="int32")
ANSWER = np.array([[13], [16]], dtype="int32")
RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, size=(3, 16, 24)).astype("uint8")
MELS = 5
FEATURES = RNG.normal(size=(3, 13, MELS)).astype("float32")
FRAMES = np.array([13, 9, 6], dtype="int32")
DIGITS_IN = np.array([[2, 5, 6, 7], [2, 8, 0, 0], [2, 9, 4, 5]], dtype="int32")
DIGITS_OUT = np.array([[5, 6, 7, 3], [8, 3, 0, 0], [9, 4, 5, 3]], dtype="int32")
SEE_AND_HEAR = {
    "show_attend_tell": {"embed_dim": 8, "hidden_size": 12, "conv_layers": 2, "filters": 4, "attention_penalty": 0.5},
    "show_attend_tell (hard)": {"embed_dim": 8, "hidden_size": 12, "conv_layers": 2, "filters": 4,
                                "attention_mode": "hard"},
}
LAS = {"embed_dim": 8, "hidden_size": 12, "listener_units": 6, "pyramid_layers": 2,
       "attention_options": {"units": 8, "filters": 2, "kernel_size": 3}}
CLASSIFIER = {"embed_dim": 8, "intermediate_dim": 16, "num_layers": 2, "num_heads": 2, "max_length": 16}


def steps(model, inputs, targets):
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0))
    losses = [float(model.train_on_batch(inputs, targets)) for _ in range(4)]
    return losses[0], losses[-1]


def main():
    failed = []
    cases = [(name, dict(source_vocab_size=13, target_vocab_size=11, **kw), (SOURCE, TARGET_IN), TARGET_OUT)
             for name, kw in SEQ2SEQ.items()]
    cases += [(name, dict(vocab_size=17, memory_size=6, **kw), (STORY, QUESTION), ANSWER) for name, kw in QA.items()]
    cases += [(name, dict(target_vocab_size=11, **kw), (IMAGES, DIGITS_IN), DIGITS_OUT)
              for name, kw in SEE_AND_HEAR.items()]
    cases.append(("listen_attend_spell", dict(target_vocab_size=11, num_mels=MELS, **LAS),
                  (FEATURES, FRAMES, DIGITS_IN), DIGITS_OUT))
    cases.append(("transformer_classifier", dict(vocab_size=17, num_classes=4, **CLASSIFIER), SOURCE,
                  np.array([[2], [4], [3]], dtype="int32")))  # class + 1: 0 pads
    for name, kwargs, inputs, targets in cases:
        keras.utils.set_random_seed(0)
        try:
            first, last = steps(zoo.models.create(name.split(" ")[0], **kwargs), inputs, targets)
            ok = np.isfinite(last) and last < first
            print(f"{keras.backend.backend()} {name}: loss {first:.4f} -> {last:.4f} {'ok' if ok else 'NOT LEARNING'}")
            if not ok:
                failed.append(name)
        except Exception as error:  # one line per model, then the rest still run
            print(f"{keras.backend.backend()} {name}: FAILED {type(error).__name__}: {str(error).splitlines()[0][:300]}")
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
