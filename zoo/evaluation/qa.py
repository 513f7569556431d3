"""Scoring a story-QA reader on a split: answer accuracy and attention-as-evidence, per kind of question.

One path for training (validation each epoch, the test split) and ``evaluate.py``. ``answer_fn``
is the exported ``Reader.answer`` (raw strings in), so a run scores exactly what it exports.

Metrics (``<split>_`` prefixed in a run): ``accuracy``; ``evidence`` (share of (question, hop)
pairs whose most-attended sentence is gold evidence, ``zoo.metrics.evidence``); ``evidence_hop<k>``;
and ``accuracy_<kind>``, ``evidence_<kind>`` for every kind of question in the split.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from zoo.metrics.evidence import evidence_by_hop, evidence_hits
from zoo.tracking import log_files, log_scores

ATTENTION_DIR = "attention"


def _stories(examples) -> Tuple[List[str], List[str]]:
    from zoo.data.story_qa import story_text

    return [story_text(e.story) for e in examples], [e.question for e in examples]


def qa_metrics(answers: Sequence[str], sentence_attention, examples) -> Dict[str, float]:
    """``accuracy``, ``evidence``, ``evidence_hop<k>``, and both per kind, from a reader's outputs."""
    references = [e.answer.lower() for e in examples]
    correct = np.array([a == r for a, r in zip(answers, references)], dtype=bool)
    hits = evidence_hits(sentence_attention, [e.supporting for e in examples])
    metrics = {"accuracy": float(correct.mean()) if len(correct) else 0.0,
               "evidence": float(hits.mean()) if hits.size else 0.0}
    for hop, value in enumerate(evidence_by_hop(sentence_attention, [e.supporting for e in examples]), start=1):
        metrics[f"evidence_hop{hop}"] = value
    kinds = np.array([e.kind for e in examples])
    for kind in dict.fromkeys(e.kind for e in examples):
        rows = kinds == kind
        metrics[f"accuracy_{kind}"] = float(correct[rows].mean())
        metrics[f"evidence_{kind}"] = float(hits[rows].mean())
    return metrics


def score_qa(answer_fn: Callable, examples, batch_size: int = 256):
    """``(metrics, outputs)`` of ``answer_fn`` on ``examples`` (see the module docstring)."""
    from zoo.export.reader import answer_batched

    stories, questions = _stories(examples)
    outputs = answer_batched(answer_fn, stories, questions, batch_size)
    return qa_metrics(outputs["answer"], outputs["sentence_attention"], examples), outputs


def write_predictions(path, examples, outputs) -> str:
    """``story, question, answer, prediction, correct, supporting, attended`` (top sentence per hop)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["kind", "story", "question", "answer", "prediction", "correct", "supporting", "attended"])
        for e, prediction, weights in zip(examples, outputs["answer"], outputs["sentence_attention"]):
            attended = " ".join(str(int(np.argmax(hop))) for hop in np.atleast_2d(weights))
            writer.writerow([e.kind, " | ".join(e.story), e.question, e.answer, prediction,
                             int(prediction == e.answer.lower()), " ".join(map(str, e.supporting)), attended])
    return str(path)


def write_qa_report(split: str, examples, outputs, n_plots: int, n_predictions: int, workdir: str,
                    word_attention: bool) -> List[str]:
    """``predictions.csv`` and ``attention/<split>_NN_sentences.png`` (and ``_words.png`` for
    word-level readers) for one example of each kind first, then in order, and the same examples in
    ``attention/explorer.html``; returns the paths."""
    from zoo.plots.explorer import EXPLORER, write_explorer
    from zoo.plots.qa import sentence_heatmap, word_heatmap

    paths = [write_predictions(Path(workdir) / "predictions.csv", examples[:n_predictions], outputs)]
    directory = Path(workdir) / ATTENTION_DIR
    directory.mkdir(parents=True, exist_ok=True)
    first_of_kind = list(dict.fromkeys(e.kind for e in examples))
    order = [next(i for i, e in enumerate(examples) if e.kind == k) for k in first_of_kind]
    order += [i for i in range(len(examples)) if i not in order]
    explored = []
    for n, i in enumerate(order[:n_plots]):
        e = examples[i]
        sentences = list(e.story)[-outputs["sentence_attention"][i].shape[-1]:]
        title = f"{e.question} -> {outputs['answer'][i]!r} (gold {e.answer!r}, {e.kind})"
        sentence_heatmap(outputs["sentence_attention"][i], sentences, e.supporting,
                         str(directory / f"{split}_{n:02d}_sentences.png"), title=title)
        if word_attention:
            word_heatmap(outputs["word_attention"][i], outputs["story_tokens"][i],
                         str(directory / f"{split}_{n:02d}_words.png"), title=title)
        explored.append({"title": title, "key": f"{' '.join(e.story)} {e.question} (gold {e.answer!r}, {e.kind})",
                         "views": explorer_views(outputs, i, sentences, e.supporting, word_attention)})
    if explored:
        write_explorer(directory / EXPLORER, explored, title=f"story QA: {split} split")
    return paths + [str(directory)]


def explorer_views(outputs, i: int, sentences: Sequence[str], supporting: Sequence[int], word_attention: bool):
    """One example's views for ``zoo.plots.explorer``: each hop's weights over the sentences (rows the
    hops, gold evidence marked) and, for a word-level reader, its weights over the story's words."""
    from zoo.plots.explorer import view

    hops = np.atleast_2d(np.asarray(outputs["sentence_attention"][i], dtype=np.float64))
    views = [view("hops over the sentences (gold evidence underlined)", [f"hop {h}" for h in range(1, len(hops) + 1)],
                  sentences, hops, gold=supporting)]
    if word_attention:
        weights = np.asarray(outputs["word_attention"][i], dtype=np.float64)
        tokens = np.asarray(outputs["story_tokens"][i], dtype=object)
        real = [(t, w) for row_t, row_w in zip(tokens, weights) for t, w in zip(row_t, row_w) if t not in (b"", "")]
        views.append(view("words of the story", ["words"], [t for t, _ in real], [[w for _, w in real]]))
    return views


def log_qa_outputs(split: str, examples, metrics, outputs, n_plots: int, n_predictions: int, workdir: str,
                   word_attention: bool) -> None:
    """``<split>_*`` metrics, predictions.csv and attention heatmaps into the active MLflow run."""
    log_scores(split, metrics)
    log_files(write_qa_report(split, examples, outputs, n_plots, n_predictions, workdir, word_attention))


def format_table(metrics: Dict[str, float], kinds: Sequence[str], prefix: str = "test_") -> str:
    """Accuracy and evidence per kind of question, as printed at the end of a run."""
    lines = [f"{'kind':<14}{'accuracy':>10}{'evidence':>10}"]
    for kind in list(kinds) + ["all"]:
        suffix = "" if kind == "all" else f"_{kind}"
        if f"{prefix}accuracy{suffix}" in metrics:
            lines.append(f"{kind:<14}{metrics[f'{prefix}accuracy{suffix}']:>10.3f}"
                         f"{metrics[f'{prefix}evidence{suffix}']:>10.3f}")
    return "\n".join(lines)


def evaluate_qa(cfg, saved_dir: str, model_config, data_cfg, log_run_id, uri: str, workdir: str) -> Dict[str, float]:
    """``evaluate.py`` on a story-QA SavedModel: scores ``cfg.split`` of ``data_cfg`` and logs
    ``<split>_*`` to the run (``run_id``) or to a new run of ``<experiment>-evaluation``."""
    import tensorflow as tf

    from zoo.config import ConfigError
    from zoo.data import load_task
    from zoo.evaluation.logged_run import evaluation_run

    if cfg.interactive:
        raise ConfigError("interactive=true reads sentences to translate; a story-QA model takes a story and a "
                          "question: use its SavedModel's answer(story, question) or the pyfunc model.")
    overrides = {k: v for k, v in _container(cfg.decoding).items() if v is not None}
    if overrides or cfg.get("compare_to") is not None:
        raise ConfigError("decoding overrides and compare_to are for translation models; a story-QA model "
                          "answers with one word.")
    saved = tf.saved_model.load(saved_dir)
    task = load_task(data_cfg)
    examples = task.examples[cfg.split]
    metrics, outputs = score_qa(saved.answer, examples, int(cfg.batch_size))
    print(f"\n{cfg.split} split of {data_cfg.name}: {len(examples)} questions")
    print(format_table({f"{cfg.split}_{k}": v for k, v in metrics.items()}, task.kinds, prefix=f"{cfg.split}_"))
    if cfg.log:
        with evaluation_run(cfg, uri, log_run_id, data_cfg.name):
            word_attention = bool(np.any([np.any(w) for w in outputs["word_attention"][:10]]))
            log_qa_outputs(cfg.split, examples, metrics, outputs, int(cfg.tracking.attention_plots),
                           int(cfg.tracking.predictions), workdir, word_attention)
    return {f"{cfg.split}_{k}": v for k, v in metrics.items()}


def _container(node) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(node) if OmegaConf.is_config(node) else dict(node or {})
