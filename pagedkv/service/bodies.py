"""The request bodies and parameters of the HTTP API (server.py), validated by pydantic.

Strict mode, no extra fields, explicit limits: a value out of bounds is a 422 naming its
field in `loc`, before the engine sees anything. Tokens come as `text` (its UTF-8 bytes) or
`token_ids` (bytes 0-255), exactly one of the two; a lone surrogate, which no UTF-8 text
holds, is refused naming its field.
"""

from __future__ import annotations

from typing import Annotated, NoReturn

from fastapi import Header, Path
from fastapi.exceptions import RequestValidationError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from pagedkv.model.tinylm import TinyLM
from pagedkv.service.limits import ServiceLimits

# Defaults of the per-request limits (ServiceLimits; `serve --max-prompt-tokens` etc.).
MAX_PROMPT_TOKENS = ServiceLimits.max_prompt_tokens  # tokens (bytes of text) in one create request
MAX_APPEND_TOKENS = ServiceLimits.max_append_tokens  # tokens in one append request
MAX_NEW_TOKENS = ServiceLimits.max_new_tokens  # tokens one generate request may decode
SEQ_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"

SeqId = Annotated[str, StringConstraints(pattern=SEQ_ID_PATTERN)]
TokenId = Annotated[int, Field(ge=0, le=255)]
PathSeqId = Annotated[str, Path(pattern=SEQ_ID_PATTERN, description="1-64 of A-Z a-z 0-9 _ . : -")]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        description="retry with the same key: the first answer, applied once",
    ),
]


def too_large(field: str, message: str) -> NoReturn:
    """A request over a configured size: the same 422 body as pydantic's own checks."""
    raise RequestValidationError([{"loc": ("body", field), "msg": message, "type": "too_large"}])


def _encodable(text: str | None) -> str | None:
    """JSON can carry a lone surrogate ("\\ud800"), which no UTF-8 text holds: refuse it here,
    so the 422 names the field, instead of failing later when the text is encoded."""
    if text is not None:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"must be valid Unicode: lone surrogate {text[exc.start]!r} at index {exc.start}"
            ) from None
    return text


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class _Tokens(_Body):
    """Exactly one of `text` (UTF-8 bytes become tokens) or `token_ids` (bytes 0-255)."""

    text: str | None = None
    token_ids: list[TokenId] | None = None

    @field_validator("text")
    @classmethod
    def _text_fits(cls, text: str | None) -> str | None:
        if text is not None and not text:
            raise ValueError("text must encode to at least 1 UTF-8 byte")
        return _encodable(text)

    @field_validator("token_ids")
    @classmethod
    def _ids_fit(cls, ids: list[int] | None) -> list[int] | None:
        if ids is not None and not ids:
            raise ValueError("token_ids must hold at least 1 id")
        return ids

    @model_validator(mode="after")
    def _exactly_one(self) -> _Tokens:
        if (self.text is None) == (self.token_ids is None):
            raise ValueError("give exactly one of text or token_ids")
        return self

    @property
    def field(self) -> str:
        """The field the tokens came in, for errors that name it."""
        return "text" if self.text is not None else "token_ids"

    def tokens(self, limit: int) -> list[int]:
        """The request's tokens; a 422 naming the field when there are more than `limit`."""
        if self.text is not None:
            tokens, field = TinyLM.encode(self.text), "text"
        else:
            assert self.token_ids is not None  # _exactly_one
            tokens, field = list(self.token_ids), "token_ids"
        if len(tokens) > limit:
            too_large(
                field, f"{field} holds {len(tokens)} tokens; this server takes at most {limit} per request"
            )
        return tokens


class CreateSequence(_Tokens):
    seq_id: SeqId | None = Field(None, description="omit to get seq-1, seq-2, ...")
    extra_key: Annotated[str, StringConstraints(max_length=64)] | None = Field(
        None, description="cache salt: prompts with different keys never share pages"
    )

    _extra_key_encodable = field_validator("extra_key")(_encodable)


class AppendTokens(_Tokens):
    pass


class Generate(_Body):
    max_new_tokens: int = Field(16, ge=1, description="at most the server's --max-new-tokens")
    temperature: float = Field(0.0, ge=0.0, le=10.0, allow_inf_nan=False)
    seed: int = Field(0, ge=0, le=2**32 - 1)


class Fork(_Body):
    child_id: SeqId | None = Field(None, description="omit to get the next seq-N")
