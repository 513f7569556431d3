"""Graph-compiled decoding for every ``Seq2SeqModel``; usable inside a SavedModel."""

from zoo.decoding.greedy import greedy_decode

__all__ = ["greedy_decode"]
