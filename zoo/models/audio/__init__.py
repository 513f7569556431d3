"""Models that listen: a listener's frames of a recording as the memory a decoder attends over.

- ``listen_attend_spell``: Chan et al. 2016's listener (a bidirectional RNN over log-mel frames, then
  pyramidal layers that halve the time resolution each) and speller (an RNN decoder attending over the
  listener's frames, location-aware by default: Chorowski et al. 2015), as a ``Seq2SeqModel`` whose
  source is ``(features float32 [B, F, M], num_frames int32 [B])``, so greedy search
  (``zoo.decoding``) reads digit strings from it unchanged.
"""
