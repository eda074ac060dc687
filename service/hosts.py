"""Which Host names the API answers to: a page on another site that rebinds its own name to
this service's address (DNS rebinding) sends its own name as Host, and gets a 400.

Allowed: localhost's names, the address the API is bound to (for a wildcard bind, this
machine's host name), and TVMREPRO_ALLOWED_HOSTS (comma-separated names; ".example.org"
also allows every name under it; "*" allows any Host, for a proxy in front that checks).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from tvmrepro.settings import Settings, variable_name

LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_BINDS = ("", "0.0.0.0", "::")


def host_name(header: str) -> str:
    """The name of a Host header, without port, brackets, case or trailing dot:
    'Example.org.:8000' -> 'example.org', '[::1]:8000' -> '::1'."""
    value = header.strip().lower()
    if value.startswith("["):
        value = value[1:value.find("]")] if "]" in value else value[1:]
    elif value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


@dataclass(frozen=True)
class AllowedHosts:
    """The Host names one API answers to."""

    names: frozenset[str]
    suffixes: tuple[str, ...] = ()
    any_host: bool = False

    @classmethod
    def of(cls, settings: Settings) -> AllowedHosts:
        """The names for these settings (their `host` is the address the API is bound to)."""
        names = set(LOCAL_NAMES)
        bound = host_name(settings.host) if settings.host.strip() else ""
        if bound in WILDCARD_BINDS:  # every address of this machine: its name too
            names.add(socket.gethostname().lower())
        else:
            names.add(bound)
        given = [host_name(n) if n.strip() != "*" else "*" for n in settings.allowed_hosts.split(",")
                 if n.strip()]
        return cls(names=frozenset(names | {n for n in given if not n.startswith(".")}),
                   suffixes=tuple(n for n in given if n.startswith(".")), any_host="*" in given)

    def allows(self, header: str) -> bool:
        """Whether a request with this Host header may be answered."""
        if self.any_host:
            return True
        name = host_name(header)
        return name in self.names or any(name.endswith(s) for s in self.suffixes)

    def refusal(self, header: str) -> str:
        """Why a request with this Host header is refused, naming it and the setting."""
        return (f"Host {header!r} is not a name this service answers to (it answers to "
                f"{', '.join(sorted(self.names))}); a deployment reached under another name "
                f"lists it in {variable_name('allowed_hosts')}")
