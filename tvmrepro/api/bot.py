"""What the GitHub bot's endpoints answer (docs/bot.md): a webhook delivery taken, the bot's log
of actions, a sweep of the issues it answers."""

from __future__ import annotations

from pydantic import BaseModel, Field


class WebhookTaken(BaseModel):
    """A webhook delivery taken (its work goes on as jobs and follow-ups)."""

    delivery: str
    event: str
    action: str | None = None
    outcome: str = Field(description="what the bot made of it, in words")


class BotAction(BaseModel):
    """One thing the bot did (or was refused) on GitHub, or a delivery it refused."""

    id: int
    at: float = Field(description="seconds since the epoch")
    repo: str | None = None
    number: int | None = None
    action: str = Field(description="comment, edit, label, unlabel, close, token, "
                                    "rate-limited, refused, installation, ping")
    detail: str
    http_status: int | None = Field(default=None, description="GitHub's answer's status")


class BotActionList(BaseModel):
    """A page of the bot's actions, newest first."""

    actions: list[BotAction]
    total: int
    next_offset: int | None = None


class BotSweep(BaseModel):
    """A check of every open issue the bot answers: one triage job of them all."""

    job: str | None = Field(description="the triage job (null: no issue to check)")
    issues: list[int]
