"""Who may use `kernelzero serve` and how many may connect: the token options and the connection limits.

- `client_tokens(args)`: {client name: token} from `--tokens-file` (one `NAME TOKEN` a line, `#` comments; each
  client reads only its own jobs) or `--token-file` (one shared token, client ""); None with `--insecure-no-token`,
  which serves loopback addresses only. Exactly one of the three is required: the server refuses to start otherwise.
- `connection_limits(args)`: the open-connection cap and the idle and read timeouts (service/connections.py), with
  RLIMIT_NOFILE raised so that the connections and a reserve for verification (FD_RESERVE plus 16 a job side by
  side: the database, judges' pipes, files) fit; a cap that cannot fit refuses the start.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
import resource
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelzero.service.connections import Limits

DEFAULT_MAX_CONNECTIONS = 1024
FD_RESERVE = 256  # descriptors kept beside the connections for verification (plus 16 a job side by side)


def read_tokens(path: Path) -> dict[str, str]:
    """The tokens file: `NAME TOKEN` a line, blank lines and `#` comments skipped; {name: token}.
    Names are 1-64 of A-Z a-z 0-9 . _ @ -; names and tokens are unique."""
    tokens: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ValueError(f"{path}:{number}: want `NAME TOKEN`, got {len(parts)} fields")
        name, token = parts
        if not re.fullmatch(r"[A-Za-z0-9._@-]{1,64}", name):
            raise ValueError(f"{path}:{number}: a name is 1-64 of A-Z a-z 0-9 . _ @ -, got {name[:70]!r}")
        if name in tokens or token in tokens.values():
            raise ValueError(f"{path}:{number}: the {'name' if name in tokens else 'token'} of {name} is used twice")
        tokens[name] = token
    if not tokens:
        raise ValueError(f"{path} names no client")
    return tokens


def client_tokens(args: argparse.Namespace) -> dict[str, str] | None:
    """{client name: token} from --token-file (one client, "") or --tokens-file; None with --insecure-no-token,
    which binds loopback only. ValueError for none of them, two of them, or a non-loopback host without a token."""
    given = [o for o, v in (("--token-file", args.token_file), ("--tokens-file", args.tokens_file)) if v]
    given += ["--insecure-no-token"] if args.insecure_no_token else []
    if len(given) != 1:
        raise ValueError(
            f"give one of --token-file, --tokens-file or --insecure-no-token (loopback only), got {given or 'none'}"
        )
    if args.tokens_file:
        return read_tokens(args.tokens_file)
    if args.token_file:
        token = args.token_file.read_text().strip()
        if not token or len(token.split()) != 1:
            raise ValueError(f"{args.token_file} must hold one token (no spaces)")
        return {"": token}
    if not _loopback(args.host):
        raise ValueError(f"--insecure-no-token serves loopback only; --host {args.host} is not a loopback address")
    return None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def connection_limits(args: argparse.Namespace) -> Limits:
    """The connection limits, with RLIMIT_NOFILE raised (up to its hard limit) so that the connections and a
    reserve for everything else (the database, judges' pipes, files) fit; ValueError if --max-connections
    cannot fit."""
    from kernelzero.service.connections import Limits

    reserve = FD_RESERVE + 16 * args.jobs
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    want = (args.max_connections or DEFAULT_MAX_CONNECTIONS) + reserve
    if soft != resource.RLIM_INFINITY and soft < want:
        soft = min(want, ceiling)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    room = (ceiling if soft == resource.RLIM_INFINITY else soft) - reserve
    if args.max_connections is not None and args.max_connections > room:
        raise ValueError(
            f"--max-connections {args.max_connections} needs {want} descriptors with the {reserve} kept for "
            f"verification, and RLIMIT_NOFILE allows {ceiling}; raise it (ulimit -n) or lower --max-connections"
        )
    if room < 16:
        raise ValueError(f"RLIMIT_NOFILE allows {ceiling} descriptors: too few for connections beside verification")
    return Limits(min(args.max_connections or DEFAULT_MAX_CONNECTIONS, room), args.idle_timeout_s, args.read_timeout_s)
