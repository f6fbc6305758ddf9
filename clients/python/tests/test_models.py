"""The models against the API contract (clients/openapi.json), and the
client against a stand-in server: no Corral server needed."""
import json
import os
import sys
import tempfile
import threading
import unittest
from datetime import timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
if os.environ.get("CORRAL_TEST_INSTALLED") == "1":
    sys.path.append(os.path.dirname(HERE))  # gen_models only: corral is the installed one
else:
    sys.path.insert(0, os.path.dirname(HERE))

import corral  # noqa: E402
import gen_models  # noqa: E402
from corral import config, models  # noqa: E402

DOC = os.path.join(HERE, "..", "..", "openapi.json")


def load_doc():
    with open(DOC, encoding="utf-8") as f:
        return json.load(f)


class ModelsMatchDocument(unittest.TestCase):
    def test_generated_file_current(self):
        with open(gen_models.OUT, encoding="utf-8") as f:
            self.assertEqual(f.read(), gen_models.generate(load_doc()),
                             "corral/models.py is stale: run clients/generate.sh")

    def test_every_object_schema_is_a_model_with_its_fields(self):
        schemas = load_doc()["components"]["schemas"]
        objects = {n: s for n, s in schemas.items() if s.get("type") == "object" and "properties" in s}
        self.assertEqual(set(objects), set(models.MODELS))
        for name, schema in objects.items():
            model = models.MODELS[name]
            self.assertEqual(set(model.field_names()), set(schema["properties"]), name)

    def test_seed_experiment_run_fields_on_job(self):
        fields = models.Job.field_names()
        for f in ("gpu_count", "allocation", "queue_position", "estimated_start_time", "policy",
                  "priority", "retry_count", "max_retries", "submitted_at"):
            self.assertIn(f, fields)


class Conversion(unittest.TestCase):
    def test_job_from_dict(self):
        j = models.Job.from_dict({
            "id": "j1", "user": "ana", "project": "p", "command": "x", "gpu_count": 1, "nodes": 1,
            "priority": "high", "max_retries": 0, "state": "running", "retry_count": 0,
            "submitted_at": "2026-11-22T09:00:00.123456789Z", "started_at": "2026-11-22T10:00:00+01:00",
            "allocation": [{"node_id": "n1", "gpu_id": 3, "gpu_uuid": "GPU-1", "memory_gb": 80}],
            "class": "batch", "events": [{"at": "2026-11-22T09:00:00Z", "from": "queued", "to": "running", "reason": "started"}],
            "brand_new_field": [1],
        })
        self.assertEqual(j.submitted_at.microsecond, 123456)
        self.assertEqual(j.started_at.utcoffset(), timedelta(hours=1))
        self.assertEqual(j.allocation[0].gpu_id, 3)
        self.assertIsInstance(j.allocation[0].memory_gb, float)
        self.assertEqual(j.class_, "batch")
        self.assertEqual(j.events[0].from_, "queued")
        self.assertEqual(j.extra, {"brand_new_field": [1]})
        d = j.to_dict()
        self.assertEqual(d["class"], "batch")
        self.assertEqual(d["submitted_at"], "2026-11-22T09:00:00.123456Z")
        self.assertEqual(d["brand_new_field"], [1])


class Config(unittest.TestCase):
    def setUp(self):
        self.saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("CORRAL_")}
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "config.json")
        os.environ["CORRAL_CONFIG"] = self.path

    def tearDown(self):
        for k in [k for k in os.environ if k.startswith("CORRAL_")]:
            del os.environ[k]
        os.environ.update(self.saved)
        self.dir.cleanup()

    def write(self, data):
        with open(self.path, "w", encoding="utf-8") as f:
            json.dump(data, f)

    def test_cases(self):
        cases = [
            # (env, config file, args, want servers, want token)
            ({}, None, {}, ["http://127.0.0.1:7450"], ""),
            ({"CORRAL_SERVER": ":9000"}, None, {}, ["http://127.0.0.1:9000"], ""),
            ({"CORRAL_SERVER": "head:7450/", "CORRAL_TOKEN": "t-env"}, None, {}, ["http://head:7450"], "t-env"),
            ({"CORRAL_SERVER": "localhost:7450"}, {"servers": {"http://127.0.0.1:7450": {"token": "t-file"}}}, {},
             ["http://localhost:7450"], "t-file"),
            ({}, {"servers": {"http://127.0.0.1:7450": {"token": "t-file"}}}, {}, ["http://127.0.0.1:7450"], "t-file"),
            ({"CORRAL_SERVER": "a:1,b:2"}, {"servers": {"http://b:2": {"token": "t-b"}}}, {},
             ["http://a:1", "http://b:2"], "t-b"),
            ({"CORRAL_SERVER": "x:1", "CORRAL_TOKEN": "t-env"}, None, {"server": "https://y", "token": "t-arg"},
             ["https://y"], "t-arg"),
            ({}, {"server": "http://head:7450", "servers": {"http://head:7450": {"token": "t-head"}}}, {},
             ["http://head:7450"], "t-head"),
            # as corral login writes it
            ({}, {"default_server": "https://head:7450", "servers": {"https://head:7450": {"token": "t-login"},
                                                                     "http://127.0.0.1:7450": {"token": "t-up"}}}, {},
             ["https://head:7450"], "t-login"),
        ]
        for env, cfg, args, want_servers, want_token in cases:
            with self.subTest(env=env, cfg=cfg, args=args):
                for k in ("CORRAL_SERVER", "CORRAL_TOKEN"):
                    os.environ.pop(k, None)
                os.environ.update(env)
                if cfg is None:
                    if os.path.exists(self.path):
                        os.remove(self.path)
                else:
                    self.write(cfg)
                c = corral.Client(**args)
                self.assertEqual(c.servers, want_servers)
                self.assertEqual(c.token, want_token)

    def test_config_path_is_the_clis(self):
        # The CLI's is Go's os.UserConfigDir()/corral/config.json: a laptop's
        # corral login saves it there, and Client() must find it.
        cases = [
            ("linux", {}, "/home/ana/.config/corral/config.json"),
            ("linux", {"XDG_CONFIG_HOME": "/xdg"}, "/xdg/corral/config.json"),
            ("darwin", {}, "/home/ana/Library/Application Support/corral/config.json"),
            ("darwin", {"XDG_CONFIG_HOME": "/xdg"}, "/home/ana/Library/Application Support/corral/config.json"),
            ("win32", {"APPDATA": r"C:\Users\ana\AppData\Roaming"},
             os.path.join(r"C:\Users\ana\AppData\Roaming", "corral", "config.json")),
            ("linux", {"CORRAL_CONFIG": "/etc/c.json"}, "/etc/c.json"),
        ]
        for platform, env, want in cases:
            with self.subTest(platform=platform, env=env):
                self.assertEqual(config.config_path(platform=platform, environ=env, home="/home/ana"), want)

    def test_bad_server(self):
        with self.assertRaises(ValueError):
            config.normalize_server("ftp://x")


class StandIn(BaseHTTPRequestHandler):
    """A stand-in server: answers from the test's routes, records requests."""

    def log_message(self, *args):
        pass

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.requests.append((self.command, self.path, dict(self.headers), json.loads(body) if body else None))
        key = self.command + " " + self.path.split("?")[0]
        status, ctype, payload = self.server.routes.get(key, (404, "application/json",
                                                              {"error": {"code": "not_found", "message": "no route"}}))
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_PATCH = handle_any


JOB = {"id": "j1", "user": "ana", "project": "p", "command": "x", "gpu_count": 1, "nodes": 1, "priority": "normal",
       "max_retries": 0, "state": "queued", "submitted_at": "2026-11-22T09:00:00Z", "retry_count": 0, "allocation": []}


class AgainstStandIn(unittest.TestCase):
    def setUp(self):
        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
        self.srv.requests, self.srv.routes = [], {}
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.client = corral.Client("127.0.0.1:%d" % self.srv.server_port, "tok")

    def tearDown(self):
        self.srv.shutdown()
        self.srv.server_close()

    def test_submit_body(self):
        self.srv.routes["POST /queue/submit"] = (201, "application/json", dict(JOB, array={"id": "a1"}))
        dep = models.Job.from_dict(dict(JOB, id="j0"))
        job = self.client.submit(["python", "train.py", "--lr", "1e-3"], gpus=2, name="t", env={"A": "1"},
                                 array="0-19%4", depends_on=[dep, "j9"], time_limit=timedelta(hours=2),
                                 image="pytorch:24.01", idempotency_key="k1", brand_new="v")
        self.assertIsInstance(job, models.Job)
        self.assertEqual(job.extra["array"], {"id": "a1"})
        method, path, headers, body = self.srv.requests[-1]
        self.assertEqual(headers["Authorization"], "Bearer tok")
        self.assertEqual(headers["Idempotency-Key"], "k1")
        self.assertEqual(body, {"command": "python train.py --lr 1e-3", "workdir": os.getcwd(), "gpu_count": 2,
                                "name": "t", "env": {"A": "1"}, "array": "0-19%4", "depends_on": "afterok:j0:j9",
                                "time_limit": 7200.0, "image": "pytorch:24.01", "brand_new": "v"})

    def test_error_carries_code_and_field(self):
        self.srv.routes["POST /queue/submit"] = (422, "application/json", {
            "error": {"code": "invalid_field", "field": "gpu_count", "message": "must be 0 or more"}})
        with self.assertRaises(corral.InvalidField) as cm:
            self.client.submit("x", gpus=-1)
        e = cm.exception
        self.assertEqual((e.status, e.code, e.field, e.message), (422, "invalid_field", "gpu_count", "must be 0 or more"))
        self.assertIn("gpu_count: must be 0 or more", str(e))

    def test_logs_tail_without_server_tail(self):
        self.srv.routes["GET /openapi.json"] = (200, "application/json", {"paths": {"/jobs/{job_id}/logs": {"get": {"parameters": []}}}})
        self.srv.routes["GET /jobs/j1/logs"] = (200, "text/plain", b"1\n2\n3\n4\n")
        self.assertEqual(self.client.logs("j1", tail=2), "3\n4\n")
        self.assertEqual(list(self.client.logs("j1", follow=True, tail=1)), ["4\n"])
        self.assertNotIn("tail=", self.srv.requests[-1][1])

    def test_logs_tail_with_server_tail(self):
        self.srv.routes["GET /openapi.json"] = (200, "application/json", {"paths": {"/jobs/{job_id}/logs": {"get": {"parameters": [{"name": "tail"}]}}}})
        self.srv.routes["GET /jobs/j1/logs"] = (200, "text/plain", b"3\n4\n")
        self.assertEqual(list(self.client.logs("j1", follow=True, tail=2)), ["3\n", "4\n"])
        self.assertIn("tail=2", self.srv.requests[-1][1])

    def test_events_typed(self):
        stream = (b"retry: 2000\n\n"
                  b"event: update\ndata: {\"queue\": {\"queued_jobs\": [], \"statistics\": {}}}\n\n"
                  b": a comment\n"
                  b"event: ended\ndata: {\"reason\": \"token_revoked\"}\n\n")
        self.srv.routes["GET /events"] = (200, "text/event-stream", stream)
        events = list(self.client.events())
        self.assertEqual([e.event for e in events], ["update", "ended"])
        self.assertIsInstance(events[0].data, models.DashboardUpdate)
        self.assertEqual(events[1].data.reason, "token_revoked")

    def test_cancel_array_answer(self):
        self.srv.routes["DELETE /queue/a1"] = (200, "application/json", {
            "id": "a1", "user": "ana", "project": "p", "array": "0-3", "throttle": 0, "task_count": 4, "task_min": 0,
            "task_max": 3, "gpu_count": 1, "nodes": 1, "priority": "normal", "command": "x",
            "submitted_at": "2026-11-22T09:00:00Z", "state": "canceled", "counts": {}})
        self.assertIsInstance(self.client.cancel("a1", grace="5s"), models.Array)
        self.assertIn("grace=5s", self.srv.requests[-1][1])

    def test_unreachable(self):
        c = corral.Client("127.0.0.1:1", "t")
        with self.assertRaises(corral.Unreachable):
            c.get("j1")

    def test_wait_timeout(self):
        self.srv.routes["GET /jobs/j1"] = (200, "application/json", JOB)
        with self.assertRaises(corral.WaitTimeout):
            self.client.wait("j1", timeout=0.3, poll=0.1)


if __name__ == "__main__":
    unittest.main()
