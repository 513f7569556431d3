"""``evaluate(cfg)``: score a run's (or any exported) SavedModel on a split, log to MLflow."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Dict, Optional

from omegaconf import DictConfig, OmegaConf

from zoo import kernels
from zoo.config import CONF_DIR, ConfigError, data_name, options, quiet_tensorflow
from zoo.environ import set_onednn, set_threads
from zoo.evaluation.logged_run import evaluation_run
from zoo.evaluation.report import log_outputs
from zoo.evaluation.scoring import score_split
from zoo.metrics.paired_bootstrap import paired_bootstrap_bleu
from zoo.tracking import resolve_tracking_uri, use_tracking_uri

SHADES = " .:-=+*#%@"


def _data_config(cfg: DictConfig, model_config: DictConfig) -> DictConfig:
    if cfg.get("data") is None:
        return model_config.data
    name = data_name(cfg.data)
    if name not in options("data"):
        raise ConfigError(f"Unknown data '{name}'. Available: {', '.join(options('data'))}")
    data = OmegaConf.load(CONF_DIR / "data" / f"{name}.yaml")
    data.seed = model_config.get("seed", 0)
    return data


def _find_saved_model(root: str) -> Optional[str]:
    for dirpath, _, files in os.walk(root):
        if "saved_model.pb" in files:
            return dirpath
    return None


def fetch_saved_model(cfg: DictConfig, uri: str, workdir: str):
    """``(saved_model_dir, run_id_to_log_to_or_None)`` for run_id / model_uri / saved_model."""
    import mlflow

    given = [k for k in ("run_id", "saved_model", "model_uri") if cfg.get(k) is not None]
    if len(given) != 1:
        raise ConfigError("Give exactly one of run_id=<MLflow run id>, saved_model=<directory> or "
                          f"model_uri=<runs:/... | models:/...>. Received: {', '.join(given) or 'none'}")
    if cfg.get("run_id") is not None:
        try:
            mlflow.get_run(cfg.run_id)
        except Exception as error:  # noqa: BLE001 - MLflow's not-found error
            raise ConfigError(f"run_id={cfg.run_id} is not a run in {uri}: {str(error).splitlines()[0]}") from None
        path = mlflow.artifacts.download_artifacts(run_id=cfg.run_id, artifact_path="saved_model",
                                                   dst_path=workdir, tracking_uri=uri)
        return path, cfg.run_id
    if cfg.get("model_uri") is not None:
        try:
            path = mlflow.artifacts.download_artifacts(artifact_uri=str(cfg.model_uri), dst_path=workdir,
                                                       tracking_uri=uri)
        except Exception as error:  # noqa: BLE001
            raise ConfigError(f"model_uri={cfg.model_uri} could not be fetched from {uri}: "
                              f"{str(error).splitlines()[0]}") from None
        found = _find_saved_model(path)
        if found is None:
            raise ConfigError(f"model_uri={cfg.model_uri} holds no SavedModel: is it a model logged by train.py?")
        run_id = None
        if str(cfg.model_uri).startswith("runs:/"):
            run_id = str(cfg.model_uri)[len("runs:/"):].split("/")[0]
        return found, run_id
    path = str(cfg.saved_model)
    if not os.path.exists(os.path.join(path, "saved_model.pb")):
        raise ConfigError(f"saved_model={path} is not a SavedModel directory (no saved_model.pb there).")
    return path, None


def ascii_attention(weights, source_tokens, target_tokens) -> str:
    """A text heatmap: one row per output token, one column per input token."""
    def clean(tokens):
        return [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in tokens if t not in (b"", "")]

    src, tgt = clean(source_tokens), clean(target_tokens)
    width = max([len(t) for t in tgt] + [5])
    lines = [" " * (width + 1) + " ".join(s if s != " " else "␣" for s in src)]
    for i, token in enumerate(tgt):
        row = weights[i][: len(src)]
        cells = [SHADES[min(len(SHADES) - 1, int(w * (len(SHADES) - 1) + 0.5))] for w in row]
        lines.append(f"{token:>{width}} " + " ".join(c.ljust(max(1, len(s))) for c, s in zip(cells, src)))
    return "\n".join(lines)


def _interactive(translate_fn) -> None:
    import tensorflow as tf

    print("Type a sentence and press Enter (Ctrl-D to quit).", file=sys.stderr)
    for line in sys.stdin:
        line = line.rstrip("\n")
        out = translate_fn(tf.constant([line]))
        print(out["text"].numpy()[0].decode("utf-8"))
        print(ascii_attention(out["attention"].numpy()[0], out["source_tokens"].numpy()[0],
                              out["target_tokens"].numpy()[0]))
        sys.stdout.flush()


def perplexity(keras_model, task, split: str, batch_size: int) -> float:
    """``exp`` of the mean per-token cross-entropy with teacher forcing."""
    import math

    import keras

    from zoo.data import make_dataset

    keras_model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0))
    loss = keras_model.evaluate(make_dataset(task, split, batch_size), verbose=0)
    loss = loss[0] if isinstance(loss, (list, tuple)) else loss
    return float(math.exp(min(loss, 50.0)))


def evaluate(cfg: DictConfig) -> Dict[str, float]:
    """Scores a trained model on ``cfg.split`` and logs ``<split>_<metric>`` to MLflow.

    Metrics go to the run itself (``run_id``, ``model_uri=runs:/...``) or to a new run of
    the experiment ``<tracking.experiment>-evaluation`` (``saved_model``, ``models:/...``,
    or any decoding override, so the training run keeps the metrics of its own decoding).
    """
    if cfg.split not in ("train", "val", "test"):
        raise ConfigError(f"split={cfg.split} is not valid. Available: train, val, test")
    kernels.use(cfg.get("kernels", kernels.FAST))  # zoo/fast's speed-ups or the plain reference path
    quiet_tensorflow()
    set_onednn(cfg.get("onednn"), prefix="", command="python evaluate.py")  # before TensorFlow is imported
    import mlflow
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - ops used by the SavedModel

    set_threads(cfg.get("intra_op_threads"), cfg.get("inter_op_threads"), prefix="",
                command="python evaluate.py")  # before any op runs

    from zoo.data import load_task

    uri = resolve_tracking_uri(cfg.tracking.uri)
    use_tracking_uri(uri)
    overrides = {k: v for k, v in OmegaConf.to_container(cfg.decoding).items() if v is not None}
    with tempfile.TemporaryDirectory() as workdir:
        saved_dir, log_run_id = fetch_saved_model(cfg, uri, workdir)
        extra = Path(saved_dir) / "assets.extra"
        if not (extra / "config.yaml").exists():
            raise ConfigError(f"{saved_dir} has no assets.extra/config.yaml: it was not exported by train.py, "
                              f"so the data to score it on is unknown.")
        model_config = OmegaConf.load(extra / "config.yaml")
        if model_config.model.get("task") == "qa":  # story QA: answers and evidence, zoo.evaluation.qa
            from zoo.evaluation.qa import evaluate_qa

            return evaluate_qa(cfg, saved_dir, model_config, _data_config(cfg, model_config), log_run_id, uri,
                               workdir)
        if model_config.model.get("task") == "classify":  # a class per text: zoo.evaluation.classify
            from zoo.evaluation.classify import evaluate_classify

            return evaluate_classify(cfg, saved_dir, _data_config(cfg, model_config), log_run_id, uri, workdir)
        saved = tf.saved_model.load(saved_dir)
        translate_fn = saved.translate
        keras_model = None
        if overrides or (cfg.perplexity and not cfg.interactive):  # interactive translates, scores nothing
            if (extra / "model.keras").exists():
                import keras

                import zoo.models  # noqa: F401 - registers the classes the .keras file names

                keras_model = keras.models.load_model(extra / "model.keras", compile=False, safe_mode=True)
            elif overrides:
                raise ConfigError(f"decoding overrides need the Keras model, and {saved_dir} has no "
                                  f"assets.extra/model.keras.")
        if cfg.interactive:
            _interactive(translate_fn)
            return {}

        data_cfg = _data_config(cfg, model_config)
        task = load_task(data_cfg)
        if overrides:
            from zoo.export.translator import Translator

            decoding = OmegaConf.to_container(model_config.decoding, resolve=True)
            decoding.update(overrides)
            translator = Translator(keras_model, task.source_tokenizer, task.target_tokenizer,
                                    task.max_source_length, model_config.decoding.max_length or task.max_target_length,
                                    decoding=decoding)
            translate_fn = translator.translate
            print(f"Decoding: {decoding}")
        sources, references = task.splits[cfg.split]
        metrics, signatures, outputs = score_split(
            translate_fn, sources, references, batch_size=int(cfg.batch_size),
            reference_tokens=task.target_tokenizer.python_split(references))
        if keras_model is not None and cfg.perplexity:
            metrics["perplexity"] = perplexity(keras_model, task, cfg.split, int(cfg.batch_size))
        if cfg.get("compare_to") is not None:
            other_dir = mlflow.artifacts.download_artifacts(run_id=cfg.compare_to, artifact_path="saved_model",
                                                            dst_path=os.path.join(workdir, "other"), tracking_uri=uri)
            other = tf.saved_model.load(other_dir)
            other_metrics, _, other_outputs = score_split(other.translate, sources, references,
                                                          batch_size=int(cfg.batch_size))
            metrics.update(paired_bootstrap_bleu(outputs["text"], other_outputs["text"], references,
                                                 samples=int(cfg.bootstrap_samples)))

        print(f"\n{cfg.split} split of {data_cfg.name}: {len(sources)} examples")
        print(f"{'metric':<28}{'value':>12}")
        for key, value in metrics.items():
            print(f"{cfg.split + '_' + key:<28}{value:>12.4f}")
        if cfg.get("compare_to") is not None:
            print(f"BLEU difference vs {cfg.compare_to}: {metrics['bleu_diff']:+.2f} "
                  f"(95% CI {metrics['bleu_diff_ci_low']:+.2f} .. {metrics['bleu_diff_ci_high']:+.2f}, "
                  f"p = {metrics['bleu_diff_p_value']:.3f})")
        if cfg.log:  # a decoding other than the run's: a run of its own
            with evaluation_run(cfg, uri, None if overrides else log_run_id, data_cfg.name):
                if overrides:
                    mlflow.set_tags({f"zoo.eval.decoding.{k}": str(v) for k, v in overrides.items()})
                if cfg.get("compare_to") is not None:
                    mlflow.set_tag("zoo.eval.compare_to", str(cfg.compare_to))
                log_outputs(cfg.split, sources, references, metrics, signatures, outputs,
                            int(cfg.tracking.attention_plots), int(cfg.tracking.predictions), workdir,
                            attribution=task.attribution, target_tokenizer=task.target_tokenizer)
    return {f"{cfg.split}_{k}": v for k, v in metrics.items()}
