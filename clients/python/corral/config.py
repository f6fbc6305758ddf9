"""Where the client finds its server and token: as the corral CLI does.

The server: the argument, else $CORRAL_SERVER (one address, or several
separated by commas for servers sharing one database), else the config
file's default server ("default_server", as corral login writes it), else http://127.0.0.1:7450.

The token: the argument, else $CORRAL_TOKEN, else the one the config file
keeps for that server. The config file is $CORRAL_CONFIG, else
~/.config/corral/config.json ($XDG_CONFIG_HOME/corral/config.json; on macOS
~/Library/Application Support/corral/config.json), the CLI's:

    {"default_server": "http://head:7450",
     "servers": {"http://head:7450": {"token": "corral_..."}}}

(``corral login`` writes it; ``corral up`` its admin token for its own address.)
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List, Mapping, Optional
from urllib.parse import urlsplit, urlunsplit

DEFAULT_SERVER = "http://127.0.0.1:7450"


def config_path(platform: Optional[str] = None, environ: Optional[Mapping[str, str]] = None,
                home: Optional[str] = None) -> str:
    """$CORRAL_CONFIG, else the user config dir's corral/config.json: the
    CLI's file, whose directory is Go's os.UserConfigDir() ($XDG_CONFIG_HOME
    or ~/.config on Linux, ~/Library/Application Support on macOS, %APPDATA%
    on Windows). The arguments are for tests: sys.platform, os.environ, ~."""
    platform = platform or sys.platform
    env = os.environ if environ is None else environ
    p = env.get("CORRAL_CONFIG")
    if p:
        return p
    home = home or os.path.expanduser("~")
    if platform == "darwin":
        base = os.path.join(home, "Library", "Application Support")
    elif platform == "win32":
        base = env.get("APPDATA") or os.path.join(home, "AppData", "Roaming")
    else:
        base = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return os.path.join(base, "corral", "config.json")


def load_config(path: Optional[str] = None) -> Dict[str, Any]:
    """The config file's contents; {} when it is missing or unreadable."""
    try:
        with open(path or config_path(), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def normalize_server(s: str) -> str:
    """A server address as people type it, as a base URL (as the CLI reads it).

    "host:port" and ":port" get http:// (":port" is 127.0.0.1); a trailing
    slash goes; only http and https are accepted.
    """
    s = s.strip()
    if not s:
        return DEFAULT_SERVER
    if s.startswith(":"):
        s = "127.0.0.1" + s
    if "://" not in s:
        s = "http://" + s
    u = urlsplit(s)
    if u.scheme not in ("http", "https"):
        raise ValueError("server address %r: scheme must be http or https" % s)
    if not u.hostname:
        raise ValueError("server address %r has no host" % s)
    if u.query or u.fragment:
        raise ValueError("server address %r must not have a query or fragment" % s)
    return urlunsplit((u.scheme, u.netloc, u.path, "", "")).rstrip("/")


def server_list(server: Optional[str], config: Dict[str, Any]) -> List[str]:
    """The server addresses to use, normalized, first one first."""
    s = server or os.environ.get("CORRAL_SERVER") or ""
    if not s.strip():
        default = config.get("server") or config.get("default_server")
        s = default if isinstance(default, str) else ""
    if not s.strip():
        return [DEFAULT_SERVER]
    out: List[str] = []
    for part in s.split(","):
        if not part.strip():
            raise ValueError("server address list %r has an empty entry" % s)
        u = normalize_server(part)
        if u not in out:
            out.append(u)
    return out


def _aliases(base: str) -> List[str]:
    u = urlsplit(base)
    host, port = u.hostname or "", u.port
    others = {"localhost": ["127.0.0.1", "::1"], "127.0.0.1": ["localhost"], "::1": ["localhost"]}.get(host, [])
    out = [base]
    for h in others:
        hp = "[%s]" % h if ":" in h else h
        netloc = "%s:%d" % (hp, port) if port else hp
        out.append(urlunsplit((u.scheme, netloc, u.path, "", "")))
    return out


def token_for(server: str, config: Dict[str, Any]) -> str:
    """The token the config file keeps for server ("" when none)."""
    servers = config.get("servers")
    if not isinstance(servers, dict):
        return ""
    for k in _aliases(normalize_server(server)):
        entry = servers.get(k)
        if isinstance(entry, dict) and isinstance(entry.get("token"), str) and entry["token"]:
            return entry["token"]
    return ""


def resolve(server: Optional[str] = None, token: Optional[str] = None, config_file: Optional[str] = None):
    """Returns (servers, token) as the CLI would pick them."""
    config = load_config(config_file)
    servers = server_list(server, config)
    tok = token or os.environ.get("CORRAL_TOKEN", "").strip()
    if not tok:
        for s in servers:
            tok = token_for(s, config)
            if tok:
                break
    return servers, tok
