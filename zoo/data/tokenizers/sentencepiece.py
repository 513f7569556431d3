"""``SentencePieceTokenizer`` and its trainer: a SentencePiece unigram model of the normalized text."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import List, Optional, Sequence

import tensorflow as tf
import tensorflow_text as tf_text

from zoo.data.tokenizers._base import DEFAULT_SUBWORD_VOCAB_SIZE, VocabularyTokenizer, python_normalize
from zoo.data.tokenizers._registry import TOKENIZERS
from zoo.tokens import BOS, BOS_ID, EOS, EOS_ID, PAD, PAD_ID, SPECIALS, UNK, UNK_ID


@TOKENIZERS.register("sentencepiece")
class SentencePieceTokenizer(VocabularyTokenizer):
    """SentencePiece pieces of ``normalize_text`` (``tensorflow_text.SentencepieceTokenizer``).

    ``model`` is the serialized ``ModelProto`` (it is stored inside the SavedModel); the
    vocabulary is its pieces, so ids are the model's own ids (``<pad> <unk> <bos> <eos>`` = 0..3).
    The model is trained by ``train_sentencepiece``.
    """

    kind = "sentencepiece"

    def __init__(self, model: bytes, lowercase: bool = True, normalization: str = "text", name: str = None):
        model = bytes(model)
        vocabulary = sentencepiece_pieces(model)
        super().__init__(vocabulary, lowercase=lowercase, normalization=normalization, name=name)
        self.model = model
        # The op's model resource is shared by node name once loaded from a SavedModel: two
        # tokenizers with the default name would both run the first model. A name per model fixes it.
        scope = "sentencepiece_" + hashlib.sha256(model).hexdigest()[:16]
        self._sentencepiece = tf_text.SentencepieceTokenizer(model=model, out_type=tf.string, name=scope)

    @classmethod
    def build(cls, vocabulary: Sequence[str] = None, *, model: Optional[bytes] = None, lowercase: bool,
              normalization: Optional[str], name: Optional[str]):
        if model is None:
            raise ValueError("A sentencepiece tokenizer needs its serialized model: make_tokenizer(..., model=bytes)")
        return cls(model, lowercase=lowercase, normalization=normalization or cls.default_normalization, name=name)

    @classmethod
    def fit(cls, texts: Sequence[str], *, lowercase: bool, min_freq: int, max_size: Optional[int],
            normalization: Optional[str], name: Optional[str]):
        """A model of ``max_size`` pieces (default ``DEFAULT_SUBWORD_VOCAB_SIZE``) trained on the
        normalized ``texts``; ``min_freq`` is unused."""
        normalization = normalization or cls.default_normalization
        model = train_sentencepiece(python_normalize(texts, normalization, lowercase),
                                    vocab_size=max_size or DEFAULT_SUBWORD_VOCAB_SIZE)
        return cls.build(model=model, lowercase=lowercase, normalization=normalization, name=name)

    @classmethod
    def from_artifacts(cls, directory: Path, meta: dict, name: Optional[str] = None):
        model = (Path(directory) / "sentencepiece.model").read_bytes()
        return cls.build(model=model, lowercase=meta["lowercase"], normalization=meta["normalization"], name=name)

    def split(self, strings):
        return self._sentencepiece.tokenize(self.normalize(strings))

    def detokenize(self, ids):
        ids = tf.cast(ids, tf.int32)
        kept = tf.ragged.boolean_mask(ids, self._content_mask(ids))
        return self._sentencepiece.detokenize(kept)

    def save_artifacts(self, directory) -> List[str]:
        paths = super().save_artifacts(directory)
        model = Path(directory) / "sentencepiece.model"
        model.write_bytes(self.model)
        return paths + [str(model)]


def sentencepiece_pieces(model: bytes) -> List[str]:
    """The pieces of a serialized SentencePiece model, by id."""
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=model)
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def train_sentencepiece(texts: Sequence[str], vocab_size: int = DEFAULT_SUBWORD_VOCAB_SIZE,
                        model_type: str = "unigram") -> bytes:
    """Trains a SentencePiece model in memory on already normalized ``texts``; returns its bytes.

    Ids 0..3 are ``<pad> <unk> <bos> <eos>``; SentencePiece's own normalization is NFKC only
    (the text is already canonical), every character of the training text is covered, and
    ``vocab_size`` is a soft limit so that small corpora train too. One thread, so the model is
    the same on every run.
    """
    import sentencepiece as spm

    texts = [t for t in texts if t]
    if not texts:
        raise ValueError("Cannot train a SentencePiece model on no text.")
    required = len(set("".join(texts)) - {" "}) + len(SPECIALS) + 1
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=writer, vocab_size=max(int(vocab_size), required),
        model_type=model_type, character_coverage=1.0, hard_vocab_limit=False,
        pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
        pad_piece=PAD, unk_piece=UNK, bos_piece=BOS, eos_piece=EOS,
        normalization_rule_name="nfkc", num_threads=1, minloglevel=2,
    )
    return writer.getvalue()
