"""musictx: symbolic music generation with relative-attention Transformers."""

__version__ = "0.1.0"
