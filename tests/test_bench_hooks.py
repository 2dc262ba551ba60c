"""`python -m bench hooks`: the shipped hooks timed against recall guidance on every draw, the leans
alone and no hooks, interleaved; the ``off`` arm really makes no hook but the grammar's."""

from __future__ import annotations

from bench import hooks as bench_hooks
from bench.realtime import sampling_of
from musictx.decoding.hook import HookInputs
from musictx.decoding.hooks.registry import hooks_made
from musictx.io.metrical_tokenizer import MetricalTokenizer


def test_the_off_arm_leaves_only_the_grammar_and_the_shipped_arm_every_lean():
    tok = MetricalTokenizer()

    def made(settings: list[str]) -> set[str]:
        return set(hooks_made(HookInputs("continue", tok, sampling_of(settings), programs=[0], stop_after_bars=4)))

    arms = bench_hooks.arms()
    shipped, off, leans = made(arms["shipped"]), made(arms["off"]), made(arms["leans, no guidance"])
    assert {"recall_guidance", "motif_echo", "bass_lean"} <= shipped
    assert off == {"metrical_guard", "bar_repeats", "length"}  # the grammar, the repeat limit, the bars asked for
    assert shipped - leans == {"recall_guidance"}
    assert all(sampling_of(a).best_of == 1 for a in arms.values())  # a draw's cost, not the choice among 4


def test_the_arms_are_timed_and_compared_with_off_and_with_the_engine_alone(capsys):
    bench_hooks.main(["--seconds", "2", "--seeds", "1", "--repeats", "2"])
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split(" | ") for line in lines if line.startswith("| ") and "---" not in line]
    assert [r[0].lstrip("| ") for r in rows[1:]] == ["shipped", "guidance on every draw", "leans, no guidance", "off",
                                                     "engine alone"]
    off, shipped, engine = rows[4], rows[1], rows[5]
    assert off[3] == off[5] == off[7].rstrip(" |") == "1.00" and all(int(r[1]) > 0 for r in rows[1:])
    assert all(float(r[6]) > 0 for r in rows[1:])  # tokens per CPU second
    assert engine[1] == shipped[1]  # the engine steps as many ids as the shipped sampler drew
    ratio = next(line for line in lines if line.startswith("shipped / engine alone: "))
    assert 0 < float(ratio.split()[4]) < 1.5, ratio
    by_round = next(line for line in lines if line.startswith("shipped / engine alone, paired by round: "))
    assert "over 2 rounds" in by_round and 0 < float(by_round.split()[7]) < 1.5, by_round


def test_a_round_pairs_the_shipped_arm_with_the_engine_run_next_to_it():
    timed = {"shipped": {"tokens": 100, "walls": [1.0, 2.0]}, "engine alone": {"tokens": 100, "walls": [0.5, 0.5]}}
    assert bench_hooks.paired(timed, "shipped", "engine alone") == [0.5, 0.25]


def test_at_a_batch_the_engine_steps_as_many_ids_as_the_shipped_rows_drew(capsys):
    bench_hooks.main(["--seconds", "2", "--seeds", "1", "--repeats", "1", "--batch", "2"])
    rows = {r[0].lstrip("| "): r for r in (line.split(" | ") for line in capsys.readouterr().out.splitlines()
                                           if line.startswith("| ") and "---" not in line)}
    shipped, engine = int(rows["shipped"][1]), int(rows["engine alone"][1])
    assert shipped - 2 < engine <= shipped, (shipped, engine)  # 2 rows a step: the shipped ids, rounded down
