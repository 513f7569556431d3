"""``evaluate(cfg)``: score a run's (or any exported) SavedModel on a split, log to MLflow."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Dict

from omegaconf import DictConfig, OmegaConf

from zoo.config import CONF_DIR, ConfigError, options, quiet_tensorflow


def _data_config(cfg: DictConfig, model_config: DictConfig) -> DictConfig:
    if cfg.get("data") is None:
        return model_config.data
    name = str(cfg.data)
    if name not in options("data"):
        raise ConfigError(f"Unknown data '{name}'. Available: {', '.join(options('data'))}")
    data = OmegaConf.load(CONF_DIR / "data" / f"{name}.yaml")
    data.seed = model_config.get("seed", 0)
    return data


def evaluate(cfg: DictConfig) -> Dict[str, float]:
    """Scores ``cfg.run_id``'s or ``cfg.saved_model``'s SavedModel on ``cfg.split``.

    Metrics are logged as ``<split>_<metric>`` to the run itself (``run_id``) or to a new
    run of the experiment ``<tracking.experiment>-evaluation`` (``saved_model``).
    """
    if (cfg.get("run_id") is None) == (cfg.get("saved_model") is None):
        raise ConfigError("Give exactly one of run_id=<MLflow run id> or saved_model=<directory>.")
    if cfg.split not in ("train", "val", "test"):
        raise ConfigError(f"split={cfg.split} is not valid. Available: train, val, test")
    quiet_tensorflow()
    import mlflow
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - ops used by the SavedModel

    from zoo.data import load_task
    from zoo.evaluation.scoring import score_split
    from zoo.tracking import log_outputs, mlflow_run, resolve_tracking_uri, ui_command

    uri = resolve_tracking_uri(cfg.tracking.uri)
    mlflow.set_tracking_uri(uri)
    with tempfile.TemporaryDirectory() as workdir:
        if cfg.get("run_id") is not None:
            try:
                mlflow.get_run(cfg.run_id)
            except Exception as error:  # noqa: BLE001 - MLflow's not-found error
                raise ConfigError(f"run_id={cfg.run_id} is not a run in {uri}: {str(error).splitlines()[0]}") from None
            saved_dir = mlflow.artifacts.download_artifacts(run_id=cfg.run_id, artifact_path="saved_model",
                                                            dst_path=workdir, tracking_uri=uri)
        else:
            saved_dir = str(cfg.saved_model)
            if not os.path.exists(os.path.join(saved_dir, "saved_model.pb")):
                raise ConfigError(f"saved_model={saved_dir} is not a SavedModel directory (no saved_model.pb there).")
        config_path = Path(saved_dir) / "assets.extra" / "config.yaml"
        if not config_path.exists():
            raise ConfigError(f"{saved_dir} has no assets.extra/config.yaml: it was not exported by train.py, "
                              f"so the data to score it on is unknown.")
        model_config = OmegaConf.load(config_path)
        data_cfg = _data_config(cfg, model_config)
        task = load_task(data_cfg)
        sources, references = task.splits[cfg.split]
        model = tf.saved_model.load(saved_dir)
        metrics, signatures, outputs = score_split(model.translate, sources, references, batch_size=int(cfg.batch_size))

        print(f"\n{cfg.split} split of {data_cfg.name}: {len(sources)} examples")
        print(f"{'metric':<22}{'value':>10}")
        for key, value in metrics.items():
            print(f"{cfg.split + '_' + key:<22}{value:>10.4f}")
        if cfg.log:
            if cfg.get("run_id") is not None:
                context = mlflow_run(uri, cfg.tracking.experiment, run_id=cfg.run_id)
            else:
                context = mlflow_run(uri, f"{cfg.tracking.experiment}-evaluation", tags={
                    "zoo.saved_model": os.path.abspath(saved_dir), "zoo.data": str(data_cfg.name)})
            with context as run:
                log_outputs(cfg.split, sources, references, metrics, signatures, outputs,
                            int(cfg.tracking.attention_plots), int(cfg.tracking.predictions), workdir)
            print(f"Logged to MLflow run {run.info.run_id}. Open the MLflow UI: {ui_command(uri)}")
    return {f"{cfg.split}_{k}": v for k, v in metrics.items()}
