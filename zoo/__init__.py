"""attention-zoo: attention mechanisms as Keras 3 layers, composed into seq2seq models.

Importing ``zoo`` is cheap: subpackages (``zoo.attention``, ``zoo.models``, ...) import
Keras and TensorFlow only when they are imported themselves.
"""

__version__ = "0.1.0"
