"""Feedback on answers (Dify's like and dislike) and answers stopped mid-stream."""

from __future__ import annotations

from sqlalchemy import select

from core.model.conversation import ANSWER

from ..db import Database
from ..errors import NoFeedbackError, NotFoundError, StoreError
from ..models import FeedbackRow, TurnRow
from .ids import new_id, now
from .turns import STOPPED

FEEDBACK_RATINGS = ("like", "dislike")


def set_feedback(db: Database, message_id: str, user_id: str, rating: str | None, content: str | None = None) -> None:
    """Rate an answer (one rating per message and user); ``rating=None`` revokes it, and is refused
    (:class:`NoFeedbackError`, nothing written) where the user gave no rating."""
    if rating is not None and rating not in FEEDBACK_RATINGS:
        raise StoreError(f"rating {rating!r} is unknown; expected like, dislike or null")
    with db.session() as s:
        turn = s.get(TurnRow, message_id)
        if turn is None:
            raise NotFoundError(f"no message with id {message_id!r}")
        row = s.scalars(
            select(FeedbackRow).where(FeedbackRow.message_id == message_id, FeedbackRow.user_id == user_id)
        ).first()
        if rating is None:
            if row is None:  # nothing to revoke: Dify's MessageService refuses it in these words
                raise NoFeedbackError("rating cannot be None when feedback not exists")
            s.delete(row)
            return
        t = now()
        if row is None:
            s.add(
                FeedbackRow(
                    id=new_id(),
                    message_id=message_id,
                    conversation_id=turn.conversation_id,
                    user_id=user_id,
                    rating=rating,
                    content=content,
                    created_at=t,
                    updated_at=t,
                )
            )
        else:
            row.rating, row.content, row.updated_at = rating, content, t


def feedbacks(db: Database, conversation_id: str) -> dict[str, list[dict]]:
    """Every rating in a conversation: ``{message id: [{rating, content, user_id, updated_at}]}``."""
    out: dict[str, list[dict]] = {}
    with db.session(write=False) as s:
        for row in s.scalars(
            select(FeedbackRow).where(FeedbackRow.conversation_id == conversation_id).order_by(FeedbackRow.created_at)
        ):
            out.setdefault(row.message_id, []).append(
                {"rating": row.rating, "content": row.content, "user_id": row.user_id, "updated_at": row.updated_at}
            )
    return out


def mark_stopped(db: Database, message_id: str, answer: str) -> None:
    """A streamed answer the client stopped: the turn keeps the answer sent so far, status ``stopped``."""
    with db.session() as s:
        turn = s.get(TurnRow, message_id)
        if turn is None:
            raise NotFoundError(f"no message with id {message_id!r}")
        turn.status = STOPPED
        turn.answer = answer
        turn.messages = [dict(m, content=answer) if m.get("kind") == ANSWER else m for m in turn.messages or []]
