"""Graph-compiled decoding for every ``Seq2SeqModel``; usable inside a SavedModel.

``greedy_decode``, ``sample_decode`` (temperature, top-k, top-p) and ``beam_search`` (GNMT
length and coverage penalties, n-best) all drive the model's ``decode_step`` inside one
``tf.while_loop``. ``decode(model, source, max_length, cfg)`` picks by ``cfg.strategy``.
Each is written as its algorithm; ``kernels=fast`` swaps in faster rankings and filters of equal
results (``zoo.kernels``).
"""

from zoo.catalog import DECODING_STRATEGIES
from zoo.decoding.beam_search import beam_search
from zoo.decoding.greedy import greedy_decode, greedy_decode_with_scores
from zoo.decoding.sampling import sample_decode

STRATEGIES = DECODING_STRATEGIES  # one home: zoo.catalog (the config validator reads it without TensorFlow)


def decode(model, source, max_length, strategy="greedy", beam_size=4, alpha=0.0, beta=0.0,
           temperature=1.0, top_k=0, top_p=1.0, seed=0):
    """``(ids [B, T], attention [B, T, Ts], lengths [B])`` by the named strategy."""
    if strategy == "greedy":
        return greedy_decode(model, source, max_length)
    if strategy == "beam":
        out = beam_search(model, source, max_length, beam_size=beam_size, alpha=alpha, beta=beta, nbest=False)
        return out["ids"], out["attention"], out["lengths"]
    if strategy == "sample":
        return sample_decode(model, source, max_length, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
    raise ValueError(f"Unknown decoding strategy '{strategy}'. Available: {', '.join(STRATEGIES)}")


__all__ = ["STRATEGIES", "beam_search", "decode", "greedy_decode", "greedy_decode_with_scores", "sample_decode"]
