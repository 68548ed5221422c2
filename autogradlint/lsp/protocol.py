"""pygls' protocol, made to answer every request as JSON-RPC 2.0 and LSP require.

pygls drops a request whose params do not fit its type, one that is not a JSON-RPC request,
and every request after `shutdown`, without a word; a client waits for those answers forever.
Here each gets an error: InvalidParams, InvalidRequest (also after `shutdown`), and
ServerNotInitialized before `initialize`. A body that is not JSON gets ParseError.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import RPCNotification, RPCRequest

logger = logging.getLogger(__name__)
MEMBERS = ("method", "result", "error")  # a message with an id holds one of them


@dataclass(frozen=True)
class Refusal:
    """A request that is answered with an error instead of being handled."""

    id: int | str | None
    error: JsonRpcException


def request_id(data: Any) -> int | str | None:
    """The id of a message that is a request, or looks like one; None when there is none."""
    ident = data.get("id") if isinstance(data, dict) else getattr(data, "id", None)
    if isinstance(ident, (int, str)) and not isinstance(ident, bool):
        return ident
    return None


class AnsweringProtocol(LanguageServerProtocol):
    """Every request gets a response; notifications are never answered (JSON-RPC)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initialize_seen = False

    @property
    def shut_down(self) -> bool:
        """Whether `shutdown` was received (the exit status is 0 only then)."""
        return bool(self._shutdown)

    def structure_message(self, data: dict[str, Any]) -> Any:
        if "jsonrpc" in data and "id" in data and data.keys().isdisjoint(MEMBERS):
            return Refusal(request_id(data), JsonRpcInvalidRequest())  # nor a response
        if "jsonrpc" in data and "method" in data and "params" not in data:
            data = {**data, "params": None}  # JSON-RPC: "params" may be left out
        try:
            return super().structure_message(data)
        except JsonRpcException:
            if "method" not in data or "id" not in data:
                raise  # a notification or a response: nothing to answer
            ident = request_id(data)
            valid = ident is not None and isinstance(data["method"], str)
            error = JsonRpcInvalidParams() if valid else JsonRpcInvalidRequest()
            logger.warning("refused request %r: %s", ident, error.message)
            return Refusal(ident, error)

    def handle_message(self, message: Any) -> None:
        if isinstance(message, Refusal):
            self.refuse(message.id, message.error)
        elif not hasattr(message, "jsonrpc"):  # not an object, or one without "jsonrpc"
            self.refuse(request_id(message), JsonRpcInvalidRequest())
        elif isinstance(message, RPCRequest):
            self._handle_request_message(message)
        elif isinstance(message, RPCNotification) and not self.initialize_seen:
            if message.method == types.EXIT:  # the one notification that counts before
                super().handle_message(message)
        else:
            super().handle_message(message)

    def _handle_request_message(self, message: Any) -> None:
        if message.jsonrpc != self.VERSION:
            self.refuse(message.id, JsonRpcInvalidRequest())
        elif self._shutdown:
            self.refuse(message.id, JsonRpcInvalidRequest("the server has shut down"))
        elif not self.initialize_seen and message.method != types.INITIALIZE:
            self.refuse(message.id, JsonRpcServerNotInitialized())
        else:
            self.initialize_seen = True
            super().handle_message(message)

    def refuse(self, ident: int | str | None, error: JsonRpcException) -> None:
        # A dict, not lsprotocol's ResponseErrorMessage: that one leaves out `"id": null`.
        answer = {"code": error.code, "message": error.message}
        self._send_data({"jsonrpc": self.VERSION, "id": ident, "error": answer})

    def unreadable(self) -> None:
        """A message body that is not JSON: the id cannot be known, so it is null."""
        self.refuse(None, JsonRpcParseError())
