"""The reserved tokens every vocabulary starts with, and their ids (no TensorFlow, no other zoo import).

Ids ``0..3`` are ``<pad> <unk> <bos> <eos>`` in every vocabulary the tokenizers build, in every
SentencePiece model they train, and in the decoders and the exported ``Translator``.
"""

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIALS = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

__all__ = ["BOS", "BOS_ID", "EOS", "EOS_ID", "PAD", "PAD_ID", "SPECIALS", "UNK", "UNK_ID"]
