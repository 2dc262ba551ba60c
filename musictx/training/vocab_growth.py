"""Saved weights on a vocabulary that grew at its end (the infill sentinels added to a REMI tokenizer, the
pedal's two ids added to a Performance one):
every old id keeps its row, and the new rows start as the mean of the old ones, so that a new token starts
as an average token rather than a random one. torch only."""

from __future__ import annotations

import torch


def is_grown(saved_tok, data_tok) -> bool:
    """``data_tok`` is ``saved_tok`` with tokens appended after its last id (same MidiTok settings; or the
    same Performance config with the pedal's ids instead of pedal-folded note lengths)."""
    kinds = (getattr(saved_tok, "kind", None), getattr(data_tok, "kind", None))
    if kinds == ("performance", "performance"):
        saved, data = saved_tok.config.to_dict(), data_tok.config.to_dict()
        pedal = {"sustain": False, "pedal_events": True}
        return not saved["pedal_events"] and data["pedal_events"] and {**saved, **pedal} == data
    if kinds != ("remi", "remi"):
        return False
    return (saved_tok.params == data_tok.params and data_tok.vocab_size > saved_tok.vocab_size
            and not saved_tok.extra_tokens and bool(data_tok.extra_tokens))


def grow_rows(state: dict[str, torch.Tensor], old_vocab: int, new_vocab: int) -> dict[str, torch.Tensor]:
    """``state`` with every tensor whose first dimension is the vocabulary (the input embedding, the output
    head and its bias) extended to ``new_vocab`` rows."""
    out = {}
    for name, tensor in state.items():
        if tensor.dim() >= 1 and tensor.shape[0] == old_vocab and name.split(".")[0] in ("tok_emb", "head"):
            extra = tensor.float().mean(dim=0, keepdim=True).expand(new_vocab - old_vocab, *tensor.shape[1:])
            tensor = torch.cat([tensor, extra.to(tensor.dtype)], dim=0)
        out[name] = tensor
    return out
