"""Plots: attention heatmaps, scores by source length, kernel-regression fits (matplotlib, no display needed)."""

from zoo.plots.attention import attention_heatmap
from zoo.plots.by_length import metric_by_length

__all__ = ["attention_heatmap", "metric_by_length"]
