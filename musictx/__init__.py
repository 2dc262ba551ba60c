"""musictx: symbolic music generation with relative-attention Transformers.

    from musictx import load_pretrained
    net, tokenizer = load_pretrained("piano")     # the shipped piano Music Transformer
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy, so that `import musictx` (and the tokenizer, which needs no torch) stays light.
    if name in ("load_pretrained", "load_model"):
        from musictx.checkpoints import model_store

        return getattr(model_store, name)
    raise AttributeError(f"module 'musictx' has no attribute {name!r}")
