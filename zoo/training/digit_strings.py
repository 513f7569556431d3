"""What the task kinds that read a digit string out of a signal share (``task: image``, ``task: speech``).

Both read a row of handwritten or spoken digits (``zoo.data.digit_strings``, ``zoo.data.spoken_digits``)
whose every digit has a gold region in the input (a box of pixels, a span of samples), so both are
scored alike: greedy decoding of the validation split gives ``val_exact_match`` per epoch; of the test
split ``test_exact_match``, ``test_digit_error_rate`` and, against each digit's gold region mapped onto
the model's attention positions (a feature grid, listener frames), ``test_alignment_accuracy`` and
``test_alignment_mass``; the test predictions go to ``predictions.csv``, the first
``tracking.attention_plots`` test rows to ``attention/explorer.html`` (each output digit's weights, its
gold region outlined); the export is a SavedModel with the ``.keras`` model and the run's config in its
``assets.extra``.

``DigitStringKind`` holds that; a kind says how it reads a split (``read``), where each digit lies in
the model's attention positions (``gold_regions``), what the explorer shows of a row
(``explorer_views``) and which module it exports (``exporter``).
"""

from __future__ import annotations

import csv
import os
from typing import Dict, List

import numpy as np

import zoo.metrics
from zoo.training import log
from zoo.training.data import ArrayData
from zoo.training.lifecycle import TaskKind

TEST_METRICS = ("exact_match", "digit_error_rate", "alignment_accuracy", "alignment_mass")


class DigitStringData(ArrayData):
    """``ArrayData`` whose targets are digit strings: a row's target tokens are its digits and ``<eos>``."""

    def tokens_per_row(self) -> float:
        ids = self.task.target_ids("train")[:, 1:]
        return float(np.count_nonzero(ids)) / max(len(ids), 1)


def write_predictions(path, references: List[str], hypotheses: List[str], limit: int) -> str:
    """``predictions.csv``: index, reference, hypothesis, whether they are equal, the row's digit error rate."""
    from zoo.metrics.digit_error_rate import digit_error_rate

    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["index", "reference", "hypothesis", "correct", "digit_error_rate"])
        for i, (ref, hyp) in enumerate(zip(references[:limit], hypotheses[:limit])):
            writer.writerow([i, ref, hyp, int(ref == hyp), f"{digit_error_rate([hyp], [ref]):.4f}"])
    return str(path)


class DigitStringKind(TaskKind):
    """A signal to a digit string for the run lifecycle (``zoo.training.lifecycle.run``): exact match per
    epoch, the digit and alignment metrics at the end, a SavedModel export. Subclasses give ``build_data``,
    ``new_model``, ``read``, ``gold_regions`` and ``exporter``."""

    def read(self, data, model, split: str, batch_size: int):
        """Greedy decoding of ``split``: ``(texts [N], attention [N])``, each row's attention over its own
        positions (the shapes ``gold_regions`` indexes)."""
        raise NotImplementedError

    def gold_regions(self, data, model, split: str) -> list:
        """Each row's gold region per digit, in the model's attention positions (``zoo.metrics.alignment``)."""
        raise NotImplementedError

    def exporter(self, data, model):
        """The module whose ``save(directory, config_yaml=...)`` writes the SavedModel."""
        raise NotImplementedError

    def explorer_views(self, data, index: int, text: str, attention, region) -> list:
        """The ``zoo.plots.explorer`` views of test row ``index``, read as ``text`` with ``attention``
        (``read``'s), its digits' gold ``region`` (``gold_regions``')."""
        raise NotImplementedError

    def metric(self, data) -> str:
        return "exact_match"

    def validation(self, data, model, runtime):
        batch_size = int(self.cfg.trainer.batch_size)

        def val_metrics() -> Dict[str, float]:
            texts, _ = self.read(data, model, "val", batch_size)
            return {"exact_match": zoo.metrics.get("exact_match").score(texts, data.task.splits["val"].targets)}

        return val_metrics

    def score_split(self, data, model, split: str):
        """``(metrics, texts, attention, regions)``: ``TEST_METRICS`` of the greedy readings of ``split``
        (NaN where undefined), the readings, their attention and the gold regions."""
        texts, attention = self.read(data, model, split, int(self.cfg.trainer.batch_size))
        references, regions = data.task.splits[split].targets, list(self.gold_regions(data, model, split))
        metrics = {name: zoo.metrics.get(name).score(texts, references, attention=attention, regions=regions)
                   for name in TEST_METRICS}
        return {k: (float("nan") if v is None else v) for k, v in metrics.items()}, texts, attention, regions

    def score(self, data, model, workdir: str) -> Dict[str, float]:
        metrics, texts, attention, regions = self.score_split(data, model, "test")
        references = data.task.splits["test"].targets
        path = write_predictions(os.path.join(workdir, "predictions.csv"), references, texts,
                                 int(self.cfg.tracking.predictions))
        log.log_files([path])
        count = min(int(self.cfg.tracking.attention_plots), len(texts))
        if count:
            from zoo.plots.explorer import EXPLORER, write_explorer

            examples = [{"title": f"test row {i}: {references[i]} -> {texts[i]!r}", "key": f"test row {i}: {references[i]}",
                         "views": self.explorer_views(data, i, texts[i], attention[i], regions[i])}
                        for i in range(count)]
            write_explorer(os.path.join(workdir, "attention", EXPLORER), examples,
                           title=f"{self.cfg.model.name}: test split")
            log.log_files([os.path.join(workdir, "attention")])
        metrics = {f"test_{k}": v for k, v in metrics.items()}
        log.log_metrics(metrics)
        return metrics

    def export(self, data, model, config_yaml: str, workdir: str) -> Dict[str, str]:
        """``saved_model/`` (``exporter``'s), with ``assets.extra/model.keras`` and ``config.yaml``."""
        return {"saved_model": self.save_with_model(self.exporter(data, model), model, config_yaml, workdir)}

    def summary(self, data, metrics: Dict[str, float], epochs: int, train_seconds: float) -> str:
        return (f"test_exact_match = {metrics['test_exact_match']:.4f}   digit error rate = "
                f"{metrics['test_digit_error_rate']:.4f}   alignment accuracy = "
                f"{metrics['test_alignment_accuracy']:.3f}   ({epochs} epochs, {train_seconds:.0f} s training)")
