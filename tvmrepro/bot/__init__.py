"""The GitHub bot (docs/bot.md): webhook events become triage (and other) jobs of the service,
and their answers one comment per issue, labels chosen from the verdicts, and a status comment
for the commands asked. Pure logic here (commands, state, rendering, labels, floods) beside the
REST client and the follow-up the workers run; the webhook is service/github.py."""

# The Celery task that brings an issue's comments and labels up to date (worker/github.py).
FOLLOW_UP_TASK = "tvmrepro.github"
