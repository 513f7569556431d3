"""RNN encoder-decoders: a plain ``seq2seq`` (Sutskever et al. 2014), ``bahdanau`` (2015) and
``luong`` (2015), on the GRU/LSTM stacks of ``rnn.py``."""
