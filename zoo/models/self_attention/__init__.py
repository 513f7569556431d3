"""The Transformer (Vaswani et al. 2017) and its layer normalization (Ba et al. 2016)."""
