"""``Translator``: the exported ``tf.Module``: raw strings in, translations and attention out.

Tokenization (tensorflow-text), vocabulary lookup and decoding (greedy, beam search or
sampling, in one ``tf.while_loop``) all run inside the graph, so the SavedModel needs only
``tensorflow`` and ``tensorflow_text`` to load and run.
"""

import inspect

import tensorflow as tf

from zoo.decoding import STRATEGIES, beam_search, decode
from zoo.errors import ConfigError
from zoo.export import saving
from zoo.tokens import PAD_ID, SPECIALS

STRINGS = tf.TensorSpec([None], tf.string, name="inputs")
DECODE_OPTIONS = tuple(p for p in inspect.signature(decode).parameters if p not in ("model", "source", "max_length"))


def check_decoding(options, vocab_size: int) -> None:
    """Raises ConfigError for decoding settings that cannot work with a target vocabulary of
    ``vocab_size`` ids (the 4 reserved ones included): more beams, or a larger top-k, than it has
    tokens that can be produced. The ranges without the vocabulary are ``zoo.config``'s, before TensorFlow."""
    producible = vocab_size - len(SPECIALS) + 1  # every content token, and <eos>
    found = []
    beam_size = options.get("beam_size")
    if beam_size is not None and int(beam_size) > producible:
        found.append(f"decoding.beam_size={beam_size} is larger than the target vocabulary allows: {producible} "
                     f"tokens can follow <bos> (vocabulary of {vocab_size} ids). Use decoding.beam_size<={producible} "
                     f"(default: 4).")
    top_k = options.get("top_k")
    if top_k is not None and int(top_k) > vocab_size:
        found.append(f"decoding.top_k={top_k} is larger than the target vocabulary ({vocab_size} ids). Use "
                     f"decoding.top_k<={vocab_size}, or 0 for all (default: 0).")
    if found:
        raise ConfigError("\n".join(found))


class Translator(tf.Module):
    """Wraps a trained ``Seq2SeqModel`` and the task's tokenizers.

    ``translate(strings [B])`` -> dict (decoded with ``decoding["strategy"]``):
      - ``text [B]`` string: the detokenized translation;
      - ``attention [B, T_out, T_in]`` float32: cross-attention of each output token;
      - ``source_tokens [B, T_in]`` string: the input tokens the model saw (``<eos>`` last),
        padded with "";
      - ``target_tokens [B, T_out]`` string: the output tokens (``<eos>`` last when
        produced), padded with "".
    ``translate_nbest(strings [B])`` -> dict: ``text [B, N]`` and ``scores [B, N]`` (beam
    search with ``N = decoding["beam_size"]``, best first).
    Inputs longer than ``max_source_length - 1`` tokens are truncated; outputs are at most
    ``max_target_length`` tokens.
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, max_source_length, max_target_length,
                 decoding=None):
        super().__init__(name="translator")
        self.model = model.ensure_built()
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.max_source_length = int(max_source_length)
        self.max_target_length = int(max_target_length)
        # Only the options given: the rest take decode()'s defaults (greedy), as conf/decoding does.
        options = {k: v for k, v in dict(decoding or {}).items() if k in DECODE_OPTIONS and v is not None}
        if options.get("strategy", "greedy") not in STRATEGIES:
            raise ValueError(f"Unknown decoding strategy '{options['strategy']}'. Available: {', '.join(STRATEGIES)}")
        check_decoding(options, int(target_tokenizer.vocab_size))
        self._decoding = options
        self.translate = tf.function(self._translate, input_signature=[STRINGS], autograph=False)
        self.serving_default = self.translate  # the same function, for TF Serving
        self.translate_nbest = tf.function(self._translate_nbest, input_signature=[STRINGS], autograph=False)

    def _source(self, inputs):
        tokens = self.source_tokenizer.split(inputs)[:, : self.max_source_length - 1]
        rows = tf.shape(tokens.row_lengths())[0]
        tokens = tf.concat([tokens, tf.fill([rows, 1], "<eos>")], axis=1)
        return tokens, self.source_tokenizer.lookup(tokens).to_tensor(default_value=PAD_ID)

    def _translate(self, inputs):
        tokens, source_ids = self._source(inputs)
        ids, attention, lengths = decode(self.model, source_ids, self.max_target_length, **self._decoding)
        target_tokens = tf.where(tf.sequence_mask(lengths, tf.shape(ids)[1]),
                                 self.target_tokenizer.id_to_token(ids), "")
        return {
            "text": self.target_tokenizer.detokenize(ids),
            "attention": attention,
            "source_tokens": tokens.to_tensor(default_value=""),
            "target_tokens": target_tokens,
        }

    def _translate_nbest(self, inputs):
        _, source_ids = self._source(inputs)
        beam = {k: v for k, v in self._decoding.items() if k in ("beam_size", "alpha", "beta")}
        out = beam_search(self.model, source_ids, self.max_target_length, **beam)
        ids = out["nbest_ids"]
        shape = tf.shape(ids)
        text = self.target_tokenizer.detokenize(tf.reshape(ids, [shape[0] * shape[1], shape[2]]))
        return {"text": tf.reshape(text, [shape[0], shape[1]]), "scores": out["nbest_scores"]}

    def serving_signatures(self):
        return {"serving_default": self.serving_default, "translate": self.translate,
                "translate_nbest": self.translate_nbest}

    def save(self, directory, config_yaml=None):
        """Writes the SavedModel; ``config_yaml`` (the run's resolved config) goes to ``assets.extra``.
        A new translator of the same model and options is traced for it (``zoo.export.saving``)."""
        def build():
            exported = Translator(self.model, self.source_tokenizer, self.target_tokenizer, self.max_source_length,
                                  self.max_target_length, decoding=self._decoding)
            return exported, exported.serving_signatures()

        return saving.save(build, directory, config_yaml)


def translate_batched(translate_fn, sentences, batch_size=256):
    """Runs ``translate_fn`` over ``sentences`` in batches; returns lists of numpy outputs."""
    out = {"text": [], "attention": [], "source_tokens": [], "target_tokens": []}
    for start in range(0, len(sentences), batch_size):
        result = translate_fn(tf.constant(list(sentences[start:start + batch_size])))
        out["text"].extend(t.decode("utf-8") for t in result["text"].numpy())
        for key in ("attention", "source_tokens", "target_tokens"):
            out[key].extend(list(result[key].numpy()))
    return out
