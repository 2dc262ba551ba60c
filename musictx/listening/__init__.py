"""What a listener hears in notes, with numpy alone: the notes of a file with their tracks (`note_span.Span`),
the scorecard's measures (`scorecard_metrics`), the two-sample test's listening features (`listen_features`)
and the critic that scores a continuation by them (`critic.Critic`).

Below the tasks and the evaluation: a continuation chosen by its critic (`musictx.tasks.critic_choice`) and
a continuation judged (`musictx.evaluation`) measure the same notes the same way. No torch.
"""
