"""Models that read images: a CNN's feature grid as the memory a decoder attends over.

- ``show_attend_tell``: Xu et al. 2015's soft-attention captioner (an LSTM decoder attending over the
  grid's annotation vectors, the gating scalar, the deep output layer and the doubly stochastic
  penalty), as a ``Seq2SeqModel`` whose source is an image ``uint8 [B, H, W]``, so greedy and beam
  search (``zoo.decoding``) read digit strings from it unchanged.
"""
