"""Who submits a job, and what one submitter may hold of a shared service.

A submitter is the maintainer (a request bearing the deployment's TVMREPRO_MAINTAINER_TOKEN)
or a client known by its address: the connection's, or the one a reverse proxy the deployment
trusts writes into TVMREPRO_CLIENT_HEADER. An IPv6 client is its /64, the block one host is
given: it cannot become many submitters by changing its last bits. Every job keeps its
submitter (a triage's or sweep's parts their parent's): the admission of a new one counts the
submitter's waiting runs per environment and the bytes its jobs stored in the last
SUBMITTER_WINDOW_S against its `Budget`, inside the transaction that counts the queue, so that
one client's load is refused to that client (a 429 naming its budget) before the queue it
shares with everyone fills. The maintainer has no budget of its own (the queue's cap holds).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

MAINTAINER = "maintainer"
_IPV6_BLOCK = 64


def address_submitter(address: str | None) -> str:
    """The submitter of a client at `address` ("ip:203.0.113.7", "ip:2001:db8:1:2::/64");
    "ip:unknown" where it is no address (a Unix socket, a header a proxy left malformed)."""
    try:
        ip = ipaddress.ip_address((address or "").strip().strip("[]"))
    except ValueError:
        return "ip:unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:  # a dual-stack socket's IPv4 client
            return f"ip:{ip.ipv4_mapped}"
        return f"ip:{ipaddress.ip_network(f'{ip}/{_IPV6_BLOCK}', strict=False)}"
    return f"ip:{ip}"


@dataclass(frozen=True)
class Budget:
    """What one submitter may hold: waiting runs per environment, and bytes stored by its jobs
    submitted in the last `window_s` seconds."""

    runs: int
    stored_bytes: int
    window_s: float


@dataclass(frozen=True)
class Admission:
    """Who submits what is being stored now: the submitter, its budget (None: none, as the
    maintainer's), and the size of its request (what its job stores is at least that)."""

    submitter: str
    budget: Budget | None
    request_bytes: int = 0

    @property
    def maintainer(self) -> bool:
        """Whether the maintainer's token came with the request."""
        return self.submitter == MAINTAINER
