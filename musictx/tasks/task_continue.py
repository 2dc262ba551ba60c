"""``task=continue`` (the default): a seed continued, or music from nothing without one."""

from __future__ import annotations

from musictx.tasks.task import Task


class Continue(Task):
    """A seed's continuation: a performance on a Performance model (seconds of new music), a metrical seed on a
    metrical model (whole bars)."""

    name = "continue"
    chooses = True
    ends = True

    def job(self, opts, net, tok):
        # imported here: option checks and --help read this class without loading torch
        from musictx.io.tokenizers import is_metrical

        if is_metrical(tok):
            from musictx.tasks.continue_metrical import metrical_job

            return metrical_job(opts, net, tok)
        from musictx.tasks.continue_seed import performance_job
        from musictx.tasks.critic_choice import candidates_per_sample

        candidates_per_sample(opts.best_of, None)  # a Performance model has no critic: best_of > 1 is refused

        return performance_job(opts, net, tok)
