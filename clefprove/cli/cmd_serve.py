"""``clefprove serve MODEL INVARIANTS... [--addr HOST:PORT]``: the verified decision service.

The service (SPEC §6, :mod:`clefprove.app.service`) needs the ``serve`` extra (Starlette,
uvicorn, prometheus-client); only this command imports it.  The initial model passes the gate
before the port listens; if it does not, the command exits with the gate's status (1, 2 or 3)
and one line, without ever serving it.  SIGTERM or Ctrl-C stops it gracefully (exit 0).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import socket

from clefprove.errors import ClefproveError
from clefprove.fileio import read_file_bounded

DEFAULT_ADDR = "127.0.0.1:8080"
TOKEN_ENV = "CLEFPROVE_RELOAD_TOKEN"
#: A token file larger than this is refused (``--token-file /dev/zero`` must not fill memory).
MAX_TOKEN_FILE_BYTES = 64 << 10
INSTALL_HINT = "pip install 'clefprove[serve]'"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from clefprove.cli import options as op

    p = op.command(
        sub,
        "serve",
        "decision service that only ever serves a model that passed its invariants",
        ok="the service stopped cleanly (SIGTERM or Ctrl-C)",
        one="the start-up gate found an invariant violated (nothing served)",
        verdicts=True,
        signals=False,
    )
    p.add_argument("model", help="the .clef model to serve (gated at start-up; SIGHUP reloads it)")
    p.add_argument("invariants", nargs="+", help=".inv files or directories")
    p.add_argument(
        "--addr", default=DEFAULT_ADDR, metavar="HOST:PORT", help=f"listen address ({DEFAULT_ADDR})"
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a listen address other than loopback",
    )
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help=f"reload token (else ${TOKEN_ENV}; without one, HTTP reload is disabled)",
    )
    p.add_argument(
        "--store", metavar="DIR", default=None, help="admitted models (default .clefprove-store)"
    )
    op.add_cache_options(p)
    op.add_check_options(p)
    p.set_defaults(jobs=1)  # a service shares its machine: one solver process unless told
    p.add_argument(
        "--rlimit",
        type=int,
        default=50_000_000,
        metavar="N",
        help="Z3 resource limit per query (deterministic)",
    )
    p.add_argument(
        "--max-body", type=int, default=1 << 20, metavar="BYTES", help="POST /decide body limit"
    )
    p.add_argument(
        "--max-model",
        type=int,
        default=256 << 20,
        metavar="BYTES",
        help="uploaded model size limit",
    )
    p.add_argument("--access-log", action="store_true", help="one JSON line per request on stdout")
    p.add_argument(
        "--gate-nice",
        type=int,
        default=19,
        metavar="N",
        help="niceness added to the gate worker (0..19; 19: never in the way of a decision)",
    )
    p.set_defaults(func=run)


def parse_addr(addr: str, allow_remote: bool) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) -> (host, port); refuses non-loopback hosts
    unless *allow_remote*."""
    host, sep, port_text = addr.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ClefproveError(f"--addr {addr!r}: expected HOST:PORT with a port in 0..65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        raise ClefproveError(f"--addr {addr!r}: no host (use 127.0.0.1 for loopback)")
    if not allow_remote and not _is_loopback(host):
        raise ClefproveError(
            f"--addr {addr}: {host} is not a loopback address; pass --allow-remote to listen on it"
        )
    return host, int(port_text)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        import ipaddress  # here: every command registers this module's parser

        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it could resolve to anything
        return False


def read_token(path: str | None) -> str | None:
    if path is None:
        return os.environ.get(TOKEN_ENV) or None
    try:
        raw = read_file_bounded(path, MAX_TOKEN_FILE_BYTES)
        if raw is None:
            raise ClefproveError(
                f"{path}: the token file is larger than {MAX_TOKEN_FILE_BYTES} bytes"
            )
        token = raw.decode("utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ClefproveError(f"{path}: cannot read the token file: {reason}") from None
    if not token:
        raise ClefproveError(f"{path}: the token file is empty")
    return token


def _require_serve_extra() -> None:
    for module in ("starlette", "uvicorn", "prometheus_client", "python_multipart"):
        try:
            __import__(module)
        except ImportError:
            raise ClefproveError(
                f"clefprove serve needs {module.replace('_', '-')}: {INSTALL_HINT}"
            ) from None


def run(args: argparse.Namespace) -> int:
    from clefprove.cli.options import check_limits

    check_limits(args)
    for name in ("max_body", "max_model", "rlimit"):
        if getattr(args, name) < 1:
            raise ClefproveError(f"--{name.replace('_', '-')} must be at least 1")
    if not 0 <= args.gate_nice <= 19:
        raise ClefproveError(f"--gate-nice {args.gate_nice}: expected 0..19")
    host, port = parse_addr(args.addr, args.allow_remote)
    token = read_token(args.token_file)
    _require_serve_extra()

    from clefprove.app.admission import GateSettings
    from clefprove.app.service import Limits, Service, build_app, read_model_file
    from clefprove.app.store import DEFAULT_DIR, ModelStore
    from clefprove.dsl.files import expand_paths

    expand_paths(args.invariants)  # an unreadable path is exit 2 before anything starts
    from clefprove.incremental.store import cache_directory, require_parent

    # Created here, in the serving process: a cache directory that cannot be made is exit 2
    # for --cache DIR (a warning and no cache for the default), never the gate worker's crash.
    cache = cache_directory(args.cache, args.no_cache)
    settings = GateSettings(
        tuple(str(os.path.abspath(p)) for p in args.invariants),
        None if cache is None else os.path.abspath(cache),
        args.timeout,
        args.rlimit,
        args.jobs,
        args.counterexamples,
    )
    limits = Limits(args.max_body, args.max_model)
    if args.store is not None:  # as --cache: a mistyped path makes no tree of directories
        require_parent(args.store, "--store")
    store = ModelStore(args.store or DEFAULT_DIR)
    sock = _bind(host, port)
    # Until the service handles SIGHUP, ignore it; the gate's worker processes started meanwhile
    # keep ignoring it (a signal to the whole process group is the service's, not theirs).
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    service = Service(os.path.abspath(args.model), settings, store, token, limits, args.gate_nice)
    try:
        outcome = service.admit_now(read_model_file(args.model, args.max_model), args.model)
        if outcome.exit_code != 0:
            sys.stderr.write(f"clefprove serve: not serving {args.model}: {outcome.one_line()}\n")
            return outcome.exit_code
        return _serve(service, sock, build_app(service, args.access_log), args)
    finally:
        service.close()
        sock.close()


def _bind(host: str, port: int) -> socket.socket:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ClefproveError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _serve(service: Any, sock: socket.socket, app: Any, args: argparse.Namespace) -> int:
    import uvicorn

    sock.listen(2048)
    host, port = sock.getsockname()[:2]
    served = service.current
    shown = f"[{host}]" if ":" in host else host
    sys.stderr.write(
        f"clefprove serve: listening on http://{shown}:{port}  "
        f"({served.model.name} {served.model.version}, sha256 {served.sha256})\n"
    )
    sys.stderr.flush()
    config = uvicorn.Config(
        app,
        loop="auto",  # uvloop when installed
        http="auto",  # httptools when installed
        lifespan="on",
        log_level="warning",
        access_log=False,
        server_header=False,
        backlog=2048,
    )
    # uvicorn re-raises the stop signal after its graceful shutdown: make that a no-op, so a
    # stopped service exits 0.
    stopped = signal.signal(signal.SIGTERM, lambda *_: None)
    interrupted = signal.signal(signal.SIGINT, lambda *_: None)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, stopped)
        signal.signal(signal.SIGINT, interrupted)
    return 0
