"""Models that read images: a decoder attending over a grid of the image (a CNN's cells, patches, glimpses).

- ``show_attend_tell``: Xu et al. 2015's soft-attention captioner (an LSTM decoder attending over the
  grid's annotation vectors, the gating scalar, the deep output layer and the doubly stochastic
  penalty), as a ``Seq2SeqModel`` whose source is an image ``uint8 [B, H, W]``, so greedy and beam
  search (``zoo.decoding``) read digit strings from it unchanged.
- ``vision_transformer``: Dosovitskiy et al. 2021's patches ``x_p E + E_pos`` as the tokens of the zoo
  Transformer's encoder, its decoder writing the string with cross-attention over the patches; the
  attention over the image is that cross-attention traced back through the encoder by attention rollout
  (Abnar & Zuidema 2020, ``rollout``).
- ``recurrent_attention``: Mnih et al. 2014's recurrent attention model, read as Ba et al. 2015's
  multi-object reader: a multi-scale retina at locations drawn from a Gaussian policy trained by
  REINFORCE (learned baseline), an LSTM core fed the previous digit, one digit every few glimpses; its
  attention map the glimpses' boxes on a grid.
"""
