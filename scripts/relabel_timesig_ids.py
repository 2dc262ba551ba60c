"""Renumber a metrical checkpoint's TimeSig ids into the tokenizer's canonical order (one-off, kept to show how
the shipped pop model was made).

The first pop run was prepared by a tokenizer built from settings, which numbered its 13 TimeSig ids in the
order of a dict's keys (8ths first); every tokenizer read back from a file numbers them with the keys sorted
(quarters first). `MetricalTokenizer` now always builds itself the second way (tested). This script moves
the rows of the token embedding and the output layer of a checkpoint trained on the old numbering to the new
one: a relabelling, so the net computes exactly the same distribution over the same tokens.

    .venv/bin/python scripts/relabel_timesig_ids.py IN.ckpt OUT.ckpt
"""

from __future__ import annotations

import sys

import torch

from musictx.io.metrical_tokenizer import _FIXED, MetricalTokenizer

VOCAB_ROWS = ("net.tok_emb.weight", "net.head.weight")


def old_tokens() -> list[str]:
    """The id -> token list of a tokenizer built straight from settings with 8ths first, as the old prep's."""
    import miditok

    fixed = {**_FIXED, "time_signature_range": {8: [3, 5, 6, 7, 9, 12], 4: [1, 2, 3, 4, 5, 6, 7]}}
    tok = miditok.REMI(miditok.TokenizerConfig(**fixed, pitch_range=(21, 108), beat_res={(0, 4): 4, (4, 12): 2},
                                               num_velocities=16, num_tempos=64))
    return [t for t, _ in sorted(tok.vocab.items(), key=lambda kv: kv[1])]


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    new = MetricalTokenizer()
    old = old_tokens()
    assert sorted(old) == sorted(new._tokens), "not the same vocabulary"
    perm = torch.tensor([old.index(t) for t in new._tokens])  # new id -> the old id of its token
    ckpt = torch.load(src, map_location="cpu", weights_only=False)
    for name in VOCAB_ROWS:
        ckpt["state_dict"][name] = ckpt["state_dict"][name][perm].clone()
    ckpt["musictx"]["tokenizer"] = new.to_dict()
    ckpt.pop("optimizer_states", None)  # its moments are in the old order: a relabelled run is not resumed
    torch.save(ckpt, dst)
    moved = [new._tokens[i] for i in range(len(perm)) if perm[i] != i]
    print(f"wrote {dst}: {len(moved)} ids renumbered ({', '.join(moved)})")


if __name__ == "__main__":
    main()
