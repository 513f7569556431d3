"""Exports stay clean: a SavedModel trained and scored with ``kernels=fast`` (its replacements with
hand-written gradients traced into the training step and into the scoring translator) loads in a
fresh process with only TensorFlow and TensorFlow Text, as the README's example does, without a
warning from the model, and answers. One export per task kind that has a SavedModel exporter:
translation (a Transformer decoding with beam search) and story QA (a reader on GRUs). The RNN with
attention is the case of tests/test_end_to_end.py: its run trains and scores with ``kernels=fast``, and
its fresh process checks the SavedModel's load and answers print no warning. The regression task
exports a ``.keras`` file only, no SavedModel."""

import os
import subprocess
import sys

import numpy as np
import pytest

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

import zoo.models  # noqa: E402
from zoo import kernels  # noqa: E402

pytestmark = pytest.mark.slow

# Each model loaded and called in turn, between markers: a line between them came from that model.
FRESH_PROCESS = """
import sys
import tensorflow_text  # noqa: F401
import tensorflow as tf

for kind, path in zip(sys.argv[1::2], sys.argv[2::2]):
    print(f"=== {kind} loading", flush=True)
    loaded = tf.saved_model.load(path)
    if kind == "qa":
        out = loaded.signatures["answer"](story=tf.constant(["Mary went to the kitchen."]),
                                          question=tf.constant(["Where is Mary?"]))
        print("answer", out["answer"].numpy(), flush=True)
    else:
        out = loaded.signatures["translate"](inputs=tf.constant(["9 may 2018"]))
        nbest = loaded.signatures["translate_nbest"](inputs=tf.constant(["9 may 2018"]))
        print("text", out["text"].numpy(), nbest["text"].shape, flush=True)
    print(f"=== {kind} done", flush=True)
print("zoo imported:", any(name == "zoo" or name.startswith("zoo.") for name in sys.modules), flush=True)
"""


def _train_steps(model, inputs, targets, steps=1):
    """A training step with the fast kernels (eager: tracing Keras' train function would cost more than
    the step; the forward and backward passes are the same replacements)."""
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0), run_eagerly=True)
    for _ in range(steps):
        loss = model.train_on_batch(inputs, targets)
    assert np.isfinite(loss)


def _translation_export(name, directory, decoding):
    from zoo.data import load_task, make_dataset
    from zoo.export.translator import Translator
    from zoo.training.export import export

    task = load_task({"name": "dates", "train_size": 40, "val_size": 4, "test_size": 4, "seed": 0})
    keras.utils.set_random_seed(0)
    sizes = {"embed_dim": 8, "intermediate_dim": 16, "num_layers": 1, "num_heads": 2} if name == "transformer" \
        else {"embed_dim": 8, "hidden_size": 12}
    model = zoo.models.create(name, source_vocab_size=task.source_tokenizer.vocab_size,
                              target_vocab_size=task.target_tokenizer.vocab_size, **sizes)
    (source, target_in), target_out = next(iter(make_dataset(task, "train", 16).take(1)))
    _train_steps(model, (source, target_in), target_out)
    translator = Translator(model, task.source_tokenizer, task.target_tokenizer, task.max_source_length,
                            task.max_target_length, decoding=decoding)
    translator.translate(tf.constant(["9 may 2018"]))  # traced with every fast kernel, as a run's scoring does
    return export(translator, model, task, "seed: 0\n", str(directory))["saved_model"]


def _qa_export(directory):
    from zoo.data import load_task
    from zoo.data.story_qa import arrays
    from zoo.export.reader import Reader

    task = load_task({"name": "story_qa", "task": "qa", "seed": 0, "train_size": 40, "val_size": 4, "test_size": 4,
                      "kinds": ["single_fact"], "min_sentences": 2, "max_sentences": 4, "memory_size": 6,
                      "path": None, "test_path": None, "min_freq": 1})
    keras.utils.set_random_seed(0)
    model = zoo.models.create("aoa_reader", vocab_size=task.vocab_size, memory_size=task.memory_size,
                              embed_dim=8, hidden_size=6)
    data = arrays(task, "train")
    _train_steps(model, (data["story"][:16], data["question"][:16]), data["answer"][:16, None])
    reader = Reader(model.ensure_built(), task.tokenizer, task.memory_size, task.max_words, task.max_question_words)
    reader.answer(tf.constant(["Mary went to the kitchen."]), tf.constant(["Where is Mary?"]))  # traced fast
    return reader.save(str(directory / "saved_model"))


def test_saved_models_trained_with_the_fast_kernels_load_without_a_warning(tmp_path):
    with kernels.using("fast"):
        exports = {"transformer": _translation_export("transformer", tmp_path / "transformer",
                                                      {"strategy": "beam", "beam_size": 2, "alpha": 0.6}),
                   "qa": _qa_export(tmp_path / "qa")}
    script = tmp_path / "load.py"
    script.write_text(FRESH_PROCESS, encoding="utf-8")
    args = [item for kind, path in exports.items() for item in (kind, path)]
    # What a user's shell gives: TensorFlow's own log level, stderr beside stdout in one stream.
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-I", str(script), *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    log = result.stdout
    assert result.returncode == 0, log[-3000:]
    for kind in exports:
        section = log.split(f"=== {kind} loading")[1].split(f"=== {kind} done")[0]
        warned = [line for line in section.splitlines()
                  if "warning" in line.lower() or "custom gradient" in line.lower()]
        assert not warned, f"{kind}: the load printed\n" + "\n".join(warned)
        assert ("answer " if kind == "qa" else "text ") in section, section
    assert "zoo imported: False" in log  # only TensorFlow and TensorFlow Text
