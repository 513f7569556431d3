"""The scoring functions, from ``zoo.metrics`` where they live now (one module per metric); kept
so ``from zoo.evaluation.metrics import bleu, d2l_bleu, ...`` goes on working."""

from zoo.evaluation.scoring import text_metrics
from zoo.metrics.attention_statistics import attention_statistics
from zoo.metrics.bleu import bleu
from zoo.metrics.chrf import chrf
from zoo.metrics.d2l_bleu import D2L_PUNCTUATION, d2l_bleu, d2l_tokens
from zoo.metrics.exact_match import exact_match
from zoo.metrics.length_ratio import length_ratio
from zoo.metrics.paired_bootstrap import paired_bootstrap_bleu
from zoo.metrics.token_accuracy import token_accuracy

__all__ = ["D2L_PUNCTUATION", "attention_statistics", "bleu", "chrf", "d2l_bleu", "d2l_tokens", "exact_match",
           "length_ratio", "paired_bootstrap_bleu", "text_metrics", "token_accuracy"]
