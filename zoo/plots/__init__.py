"""Plots: attention heatmaps and learning curves (matplotlib, no display needed)."""

from zoo.plots.attention import attention_heatmap

__all__ = ["attention_heatmap"]
