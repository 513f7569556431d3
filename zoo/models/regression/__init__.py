"""Attention as kernel regression: Nadaraya-Watson pooling (d2l, sec. 11.2)."""
