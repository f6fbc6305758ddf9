"""The client's exceptions: an API error carries the answer's code, field and message."""
from __future__ import annotations

from typing import Optional


class CorralError(Exception):
    """An error answer of the API (or no answer at all: status 0).

    status is the HTTP status; code the machine-readable code
    (invalid_field, not_found, forbidden, ...); field the input field at
    fault, when there is one; message a sentence for people.
    """

    def __init__(self, status: int, code: str, message: str, field: Optional[str] = None, request_id: Optional[str] = None):
        self.status = status
        self.code = code
        self.message = message
        self.field = field or None
        self.request_id = request_id
        text = "%s: %s" % (field, message) if field else message
        super().__init__("%s (%s, HTTP %d)" % (text, code, status) if status else text)


class BadRequest(CorralError):
    """400: the request could not be read (malformed JSON, an unknown field)."""


class Unauthorized(CorralError):
    """401: no valid token. Set CORRAL_TOKEN or pass token=."""


class Forbidden(CorralError):
    """403: the token may not do this."""


class NotFound(CorralError):
    """404: nothing by that id or name."""


class Conflict(CorralError):
    """409: the request is fine but the job's (or cluster's) state forbids it."""


class InvalidField(CorralError):
    """422: a field or parameter is invalid; field names it."""


class RateLimited(CorralError):
    """429: too many submissions, or the queue is full."""


class Unreachable(CorralError):
    """No server answered at any of the addresses."""


class WaitTimeout(CorralError):
    """wait() gave up before the job ended."""


_BY_STATUS = {400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 422: InvalidField, 429: RateLimited}


def error_for(status: int, code: str, message: str, field: Optional[str] = None, request_id: Optional[str] = None) -> CorralError:
    """The exception for an error answer of status."""
    return _BY_STATUS.get(status, CorralError)(status, code, message, field, request_id)
