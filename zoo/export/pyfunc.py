"""The MLflow pyfunc flavor of a run: ``model/`` serves the run's SavedModel.

``zoo/export/pyfunc_model.py`` is the code MLflow stores and runs when it serves the model;
this module logs it (with the SavedModel as its artifact) to the active run.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

from zoo.environ import restored

SERVED_WITH = ("tensorflow", "tensorflow-text", "mlflow", "pandas")  # what pyfunc_model.py imports


def pyfunc_requirements() -> list:
    """The served model's pip requirements: the versions this run has installed (requirements.txt
    pins them; no second list of versions to keep in step)."""
    from importlib.metadata import version

    return [f"{name}=={version(name)}" for name in SERVED_WITH]


SERVED_CODE = Path(__file__).resolve().parent / "pyfunc_model.py"


def log_pyfunc(saved_dir: str) -> None:
    """Logs ``model/``: a pyfunc that serves the SavedModel (DataFrame ``source`` -> translations)."""
    import pandas as pd
    from mlflow.models import infer_signature

    signature = infer_signature(pd.DataFrame({"source": ["9 may 2018"]}), pd.Series(["2018-05-09"], name="translation"))
    _log_model(SERVED_CODE, saved_dir, signature)


def _log_model(code: Path, saved_dir: str, signature) -> None:
    """``mlflow.pyfunc.log_model`` of ``code`` over the SavedModel, without MLflow's chatter in the
    training output: its hints about input examples, the missing signature where ``signature`` is None,
    and the progress bar of the SavedModel's copy into the model's folder (a local copy of a few files,
    labelled "Downloading artifacts")."""
    import mlflow
    from mlflow.environment_variables import MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR

    # Without a signature (images, audio) MLflow warns that it could not infer one; why there is none is
    # said in log_image_pyfunc's and log_speech_pyfunc's docstrings, not in every run's output.
    pyfunc_logger = logging.getLogger("mlflow.pyfunc")
    level = pyfunc_logger.level
    with restored(MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR.name), warnings.catch_warnings():
        os.environ[MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR.name] = "false"
        warnings.simplefilter("ignore", UserWarning)
        if signature is None:
            pyfunc_logger.setLevel(logging.ERROR)
        try:
            mlflow.pyfunc.log_model(name="model", python_model=str(code), artifacts={"saved_model": saved_dir},
                                    pip_requirements=pyfunc_requirements(), signature=signature)
        finally:
            pyfunc_logger.setLevel(level)


READER_CODE = Path(__file__).resolve().parent / "reader_pyfunc_model.py"


def log_reader_pyfunc(saved_dir: str) -> None:
    """Logs ``model/`` for a story-QA run: a pyfunc over the SavedModel (DataFrame ``story``,
    ``question`` -> answers)."""
    import pandas as pd
    from mlflow.models import infer_signature

    example = pd.DataFrame({"story": ["Mary moved to the bathroom.\nJohn went to the hallway."],
                            "question": ["Where is Mary?"]})
    signature = infer_signature(example, pd.Series(["bathroom"], name="answer"))
    _log_model(READER_CODE, saved_dir, signature)


IMAGE_CODE = Path(__file__).resolve().parent / "image_pyfunc_model.py"
SPEECH_CODE = Path(__file__).resolve().parent / "speech_pyfunc_model.py"


def log_image_pyfunc(saved_dir: str) -> None:
    """Logs ``model/`` for an image run: a pyfunc over the SavedModel (DataFrame ``image``: canvases
    or their files -> the digits read). No signature: a cell is an array or a path, which MLflow's
    column types cannot say; the served code checks each and names the row."""
    _log_model(IMAGE_CODE, saved_dir, None)


def log_speech_pyfunc(saved_dir: str) -> None:
    """Logs ``model/`` for a speech run: a pyfunc over the SavedModel (DataFrame ``audio``: WAV bytes or
    paths -> the digits heard). No signature, as for images: a cell is bytes or a path."""
    _log_model(SPEECH_CODE, saved_dir, None)
