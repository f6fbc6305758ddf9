"""corral.Client: Corral's HTTP API from Python, standard library only."""
from __future__ import annotations

import json
import os
import shlex
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from . import config
from ._convert import format_time
from .errors import CorralError, Unreachable, WaitTimeout, error_for
from .models import MODELS, Array, ClusterStatus, Job, OrchestratorStatus, QueueResponse, Whoami

#: The states a job ends in.
TERMINAL_STATES = ("completed", "failed", "canceled")

JobRef = Union[str, Job]
Duration = Union[int, float, str, timedelta]


@dataclass
class ServerEvent:
    """One event of GET /events: its name and its data, typed.

    update: data is a DashboardUpdate (everything the dashboard shows);
    delta: a DashboardDelta against what came before; ended: an
    EventsEnded (the token was revoked or expired; the stream ends).
    """

    event: str
    data: Any
    id: Optional[str] = None


_EVENT_MODELS = {"update": "DashboardUpdate", "delta": "DashboardDelta", "ended": "EventsEnded"}


def _job_id(job: JobRef) -> str:
    if isinstance(job, Job):
        return job.id
    if isinstance(job, str) and job:
        return job
    raise TypeError("want a Job or a job id, not %r" % (job,))


def _duration(v: Duration) -> Union[float, str]:
    if isinstance(v, timedelta):
        return v.total_seconds()
    return v


def _time_param(v: Union[str, datetime, timedelta]) -> str:
    if isinstance(v, datetime):
        return format_time(v)
    if isinstance(v, timedelta):
        return "%ds" % int(v.total_seconds())
    return str(v)


class Client:
    """A client of one Corral server (or several sharing a database).

    server and token default as the corral CLI's do ($CORRAL_SERVER,
    $CORRAL_TOKEN, the client config file; see corral.config). Methods
    raise a CorralError subclass (NotFound, Forbidden, InvalidField, ...)
    carrying the API error's code, field and message. A Client may be used
    from several threads.
    """

    def __init__(self, server: Optional[str] = None, token: Optional[str] = None, *,
                 timeout: float = 30.0, config_file: Optional[str] = None, user_agent: str = "corral-python"):
        self.servers, self.token = config.resolve(server, token, config_file)
        self.server = self.servers[0]
        self.timeout = timeout
        self.user_agent = user_agent
        self._doc: Optional[Dict[str, Any]] = None

    def __repr__(self) -> str:
        return "corral.Client(server=%r)" % self.server

    # Jobs.

    def submit(self, command: Union[str, Sequence[str]], gpus: Union[int, Tuple[int, int], None] = 1, *,
               name: Optional[str] = None, project: Optional[str] = None, workdir: Optional[str] = None,
               env: Optional[Dict[str, str]] = None, array: Optional[str] = None,
               depends_on: Union[str, JobRef, Iterable[JobRef], None] = None,
               priority: Union[str, int, None] = None, time_limit: Optional[Duration] = None,
               estimated_duration: Optional[Duration] = None, max_retries: Optional[int] = None,
               gpu_type: Optional[str] = None, gpu_memory_gb: Optional[float] = None, nodes: Optional[int] = None,
               node_labels: Optional[Dict[str, str]] = None, mem_mib: Optional[int] = None,
               cpus: Optional[float] = None, image: Optional[str] = None, notify: Optional[str] = None,
               idempotency_key: Optional[str] = None, **fields: Any) -> Job:
        """Submits a job and returns it (for an array, its first task).

        command is a shell command line, or an argv list (quoted for the
        shell). gpus is GPUs per node: a number, None for the server's
        default, or (min, max) for an elastic count. array takes Slurm's
        --array grammar ("0-19", "0-99%8"). depends_on is a dependency
        expression ("afterok:ID:ID") or jobs that must complete first.
        Durations are seconds, strings such as "2h", or timedeltas.
        workdir defaults to the current directory, as for corral submit.
        Any other keyword is sent as a field of the request as it is (a
        field this version does not name, such as one a newer server
        accepts).
        """
        if not isinstance(command, str):
            command = shlex.join(list(command))
        body: Dict[str, Any] = {"command": command, "workdir": workdir if workdir is not None else os.getcwd()}
        if isinstance(gpus, tuple):
            body["gpu_count_min"], body["gpu_count"] = gpus
        elif gpus is not None:
            body["gpu_count"] = gpus
        if depends_on is not None and not isinstance(depends_on, str):
            refs = [depends_on] if isinstance(depends_on, Job) else list(depends_on)
            depends_on = "afterok:" + ":".join(_job_id(j) for j in refs)
        for key, value in (("name", name), ("project", project), ("env", env), ("array", array),
                           ("depends_on", depends_on), ("priority", priority), ("max_retries", max_retries),
                           ("gpu_type", gpu_type), ("gpu_memory_gb", gpu_memory_gb), ("nodes", nodes),
                           ("node_labels", node_labels), ("mem_mib", mem_mib), ("cpus", cpus),
                           ("image", image), ("notify", notify)):
            if value is not None:
                body[key] = value
        for key, value in (("time_limit", time_limit), ("estimated_duration", estimated_duration)):
            if value is not None:
                body[key] = _duration(value)
        body.update({k: v for k, v in fields.items() if v is not None})
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return Job.from_dict(self._json("POST", "/queue/submit", body=body, headers=headers))

    def get(self, job: JobRef) -> Job:
        """One job, with its events."""
        return Job.from_dict(self._json("GET", "/jobs/" + _quote(_job_id(job))))

    def wait(self, job: JobRef, timeout: Optional[float] = None, poll: float = 2.0) -> Job:
        """Waits until the job ends and returns it (state completed, failed or canceled).

        It asks every poll seconds at most (sooner at first); with
        timeout, it raises WaitTimeout after that many seconds.
        """
        jid = _job_id(job)
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = min(0.2, poll)
        while True:
            j = self.get(jid)
            if j.state in TERMINAL_STATES:
                return j
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(0, "timeout", "job %s is still %s after %gs" % (jid, j.state, timeout))
            pause = delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic()))
            time.sleep(pause)
            delay = min(delay * 2, poll)

    def wait_all(self, jobs: Iterable[JobRef], timeout: Optional[float] = None, poll: float = 2.0) -> List[Job]:
        """Waits until every job ends; returns them ended, in the order given."""
        ids = [_job_id(j) for j in jobs]
        deadline = None if timeout is None else time.monotonic() + timeout
        ended: Dict[str, Job] = {}
        delay = min(0.2, poll)
        while True:
            for jid in ids:
                if jid not in ended:
                    j = self.get(jid)
                    if j.state in TERMINAL_STATES:
                        ended[jid] = j
            if len(ended) == len(ids):
                return [ended[i] for i in ids]
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(0, "timeout", "%d of %d jobs still running after %gs" % (len(ids) - len(ended), len(ids), timeout))
            time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
            delay = min(delay * 2, poll)

    def cancel(self, job: JobRef, grace: Optional[Duration] = None) -> Union[Job, Array]:
        """Cancels a job (or every unfinished task of an array, given its id).

        grace is SIGTERM to SIGKILL for a running job. The answer is the
        job (or the array) as it is now: a running one is being stopped.
        """
        query = {"grace": _duration(grace)} if grace is not None else None
        data = self._json("DELETE", "/queue/" + _quote(_job_id(job)), query=query)
        if "task_count" in data and "counts" in data:
            return Array.from_dict(data)
        return Job.from_dict(data)

    def jobs(self, *, state: Optional[str] = None, user: Optional[str] = None, project: Optional[str] = None,
             name: Optional[str] = None, since: Union[str, datetime, timedelta, None] = None,
             until: Union[str, datetime, timedelta, None] = None, limit: Optional[int] = None,
             **filters: Any) -> List[Job]:
        """Jobs, newest first, filtered (since/until: a time, a timedelta back from now, or "2h").

        With limit, up to that many (following the server's pages); without,
        the server's first page (1000). Other keywords are sent as query
        parameters as they are.
        """
        query: Dict[str, Any] = {"state": state, "user": user, "project": project, "name": name,
                                 "since": _time_param(since) if since is not None else None,
                                 "until": _time_param(until) if until is not None else None, "limit": limit}
        query.update(filters)
        out: List[Job] = []
        while True:
            page = self._json("GET", "/jobs", query=query)
            out.extend(Job.from_dict(j) for j in page.get("jobs") or [])
            cursor = page.get("next_cursor")
            if not cursor or limit is None or len(out) >= limit:
                return out[:limit] if limit is not None else out
            query["cursor"] = cursor
            query["limit"] = limit - len(out)

    def queue(self, limit: Optional[int] = None) -> QueueResponse:
        """The queue, in the order jobs will be considered, with its statistics."""
        return QueueResponse.from_dict(self._json("GET", "/queue", query={"limit": limit}))

    def array(self, array_id: str) -> Array:
        """A job array: its spec and its tasks' counts by state."""
        return Array.from_dict(self._json("GET", "/arrays/" + _quote(array_id)))

    def logs(self, job: JobRef, *, follow: bool = False, tail: Optional[int] = None,
             attempt: Optional[int] = None, rank: Optional[int] = None) -> Union[str, Iterator[str]]:
        """A job's output.

        Without follow: the output so far, as one string (tail: its last
        tail lines only). With follow: an iterator over its lines (each
        ending in a newline) that ends when the attempt ends. attempt
        picks a run of a retried job (from 0; default the latest), rank a
        node of a gang.
        """
        jid = _job_id(job)
        path = "/jobs/" + _quote(jid) + "/logs"
        query: Dict[str, Any] = {"attempt": attempt, "rank": rank}
        server_tail = tail is not None and self._has_param("get", "/jobs/{job_id}/logs", "tail")
        if server_tail:
            query["tail"] = tail
        if not follow:
            text = self._request("GET", path, query=query).read().decode("utf-8", "replace")
            return _last_lines(text, tail) if tail is not None else text
        skip = 0
        if tail is not None and not server_tail:
            # This server sends the whole output: skip all but the last
            # tail lines of what there is now.
            now = self._request("GET", path, query=query).read().decode("utf-8", "replace")
            skip = max(0, len(now.splitlines()) - tail)
        query["follow"] = "true"
        return self._lines(self._request("GET", path, query=query, stream=True), skip)

    def events(self) -> Iterator[ServerEvent]:
        """The live event stream (GET /events): typed ServerEvents, until the server or token ends it.

        The first is an ``update`` with the whole picture; ``delta`` events
        follow after every change.
        """
        resp = self._request("GET", "/events", headers={"Accept": "text/event-stream"}, stream=True)
        return _sse(resp)

    # The cluster and the server.

    def cluster(self) -> ClusterStatus:
        """Every node and GPU."""
        return ClusterStatus.from_dict(self._json("GET", "/cluster/gpu-status"))

    def whoami(self) -> Whoami:
        """Who the token is: user, role, projects."""
        return Whoami.from_dict(self._json("GET", "/auth/whoami"))

    def status(self) -> OrchestratorStatus:
        """The scheduling loop's status, with the server's version."""
        return OrchestratorStatus.from_dict(self._json("GET", "/orchestrator/status"))

    def openapi(self) -> Dict[str, Any]:
        """The server's API description (GET /openapi.json)."""
        if self._doc is None:
            self._doc = self._json("GET", "/openapi.json")
        return self._doc

    # The wire.

    def _has_param(self, method: str, path: str, name: str) -> bool:
        try:
            op = self.openapi()["paths"][path][method]
        except (CorralError, KeyError, TypeError):
            return False
        return any(p.get("name") == name for p in op.get("parameters", []))

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        resp = self._request(method, path, **kw)
        with resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def _request(self, method: str, path: str, *, query: Optional[Dict[str, Any]] = None, body: Any = None,
                 headers: Optional[Dict[str, str]] = None, stream: bool = False):
        qs = urllib.parse.urlencode({k: _query_value(v) for k, v in (query or {}).items() if v is not None})
        data = json.dumps(body).encode() if body is not None else None
        h = {"Accept": "application/json", "User-Agent": self.user_agent}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if data is not None:
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        order = [self.server] + [s for s in self.servers if s != self.server]
        last: Optional[BaseException] = None
        for base in order:
            url = base + path + ("?" + qs if qs else "")
            req = urllib.request.Request(url, data=data, method=method, headers=h)
            try:
                resp = urllib.request.urlopen(req, timeout=None if stream else self.timeout)
            except urllib.error.HTTPError as e:
                raise _api_error(e) from None
            except urllib.error.URLError as e:
                last = e
                continue  # the next address, if any
            self.server = base
            return resp
        raise Unreachable(0, "unreachable", "cannot reach the Corral server at %s (%s); start one with \"corral up\", or point CORRAL_SERVER or server= at it"
                          % (", ".join(order), getattr(last, "reason", last)))

    @staticmethod
    def _lines(resp, skip: int) -> Iterator[str]:
        with resp:
            n = 0
            while True:
                line = resp.readline()
                if not line:
                    return
                n += 1
                if n > skip:
                    yield line.decode("utf-8", "replace")


def _quote(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _query_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _last_lines(text: str, n: int) -> str:
    if n <= 0:
        return ""
    lines = text.splitlines(keepends=True)
    return "".join(lines[-n:])


def _api_error(e: urllib.error.HTTPError) -> CorralError:
    raw = b""
    try:
        raw = e.read()
    except OSError:
        pass
    code, message, field = "http_%d" % e.code, raw.decode("utf-8", "replace")[:300] or e.reason, None
    try:
        detail = json.loads(raw)["error"]
        code, message, field = detail.get("code", code), detail.get("message", message), detail.get("field")
    except (ValueError, KeyError, TypeError):
        pass
    return error_for(e.code, code, message, field, e.headers.get("X-Request-Id") if e.headers else None)


def _sse(resp) -> Iterator[ServerEvent]:
    """Parses a text/event-stream into ServerEvents."""
    with resp:
        event, data, eid = "message", [], None
        while True:
            raw = resp.readline()
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line == "":
                if data:
                    yield _typed_event(event, "\n".join(data), eid)
                event, data = "message", []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                eid = value


def _typed_event(event: str, data: str, eid: Optional[str]) -> ServerEvent:
    try:
        value = json.loads(data)
    except ValueError:
        return ServerEvent(event, data, eid)
    model = MODELS.get(_EVENT_MODELS.get(event, ""))
    if model is not None and isinstance(value, dict):
        value = model.from_dict(value)
    return ServerEvent(event, value, eid)
