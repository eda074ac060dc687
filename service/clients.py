"""Who a request comes from (tvmrepro.submitters): the maintainer, by the deployment's token in
`Authorization: Bearer ...`, else a client known by its address, and that client's budget."""

from __future__ import annotations

import hmac

from flask import Request

from tvmrepro.errors import Forbidden
from tvmrepro.settings import SUBMITTER_WINDOW_S, Settings, variable_name
from tvmrepro.submitters import MAINTAINER, Admission, Budget, address_submitter

AUTHORIZATION = "Authorization"
BEARER = "bearer "


def maintainer_bearer(request: Request, settings: Settings) -> bool:
    """Whether the request bears the maintainer's token (compared in constant time); Forbidden
    for a token that is not it, so that a mistyped one is never taken for anyone's."""
    header = request.headers.get(AUTHORIZATION)
    if header is None:
        return False
    if not header.lower().startswith(BEARER):
        raise Forbidden(f"the {AUTHORIZATION} header takes 'Bearer TOKEN' (the maintainer's "
                        f"token, {variable_name('maintainer_token')})", AUTHORIZATION)
    token = header[len(BEARER):].strip().encode("utf-8", "surrogatepass")
    wanted = (settings.maintainer_token or "").encode("utf-8", "surrogatepass")
    # compare_digest of unequal lengths still takes time independent of where they differ.
    if not wanted or not hmac.compare_digest(token, wanted):
        raise Forbidden(f"the bearer token is not this service's maintainer token "
                        f"({variable_name('maintainer_token')}); send none to submit as "
                        "anyone does", AUTHORIZATION)
    return True


def client_address(request: Request, settings: Settings) -> str | None:
    """The client's address: where TVMREPRO_CLIENT_HEADER is set, the last address a proxy
    wrote into that header (the one the deployment's own proxy added), else the connection's."""
    if settings.client_header:
        value = request.headers.get(settings.client_header)
        if value:
            return value.split(",")[-1].strip()
    return request.remote_addr


def admission_of(request: Request, settings: Settings, body_bytes: int) -> Admission:
    """Who submits this request, with the budget the service gives it."""
    if maintainer_bearer(request, settings):
        return Admission(MAINTAINER, None, body_bytes)
    budget = Budget(settings.max_submitter_runs, settings.max_submitter_bytes,
                    SUBMITTER_WINDOW_S)
    return Admission(address_submitter(client_address(request, settings)), budget, body_bytes)
