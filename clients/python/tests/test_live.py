"""The client against a live Corral server: run by e2e/pyclient_test.go,
which starts `corral up` (8 simulated GPUs) and sets CORRAL_TEST_LIVE=1,
CORRAL_SERVER and CORRAL_TOKEN. Skipped otherwise."""
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
if os.environ.get("CORRAL_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.dirname(HERE))

import corral  # noqa: E402
from corral import models  # noqa: E402

LIVE = os.environ.get("CORRAL_TEST_LIVE") == "1"


@unittest.skipUnless(LIVE, "needs a live server (CORRAL_TEST_LIVE=1; e2e/pyclient_test.go sets it)")
class Live(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = corral.Client()  # $CORRAL_SERVER and $CORRAL_TOKEN, as the CLI

    def test_sweep_best_result(self):
        # The README's example: a 20-point sweep, then the best point.
        rates = [10 ** (-5 + i / 5) for i in range(20)]
        jobs = [self.client.submit("echo loss $(awk 'BEGIN { d = %r - 0.001; print d < 0 ? -d : d }')" % lr,
                                   gpus=1, name="lr-sweep", env={"LR": repr(lr)}) for lr in rates]
        ended = self.client.wait_all(jobs, timeout=120, poll=0.5)
        self.assertEqual([j.state for j in ended], ["completed"] * 20, [j.message for j in ended])
        losses = {float(j.env["LR"]): float(self.client.logs(j, tail=1).split()[1]) for j in ended}
        best = min(losses, key=losses.get)
        self.assertAlmostEqual(best, 0.001, delta=1e-9)
        self.assertEqual(ended[0].allocation[0].node_id is not None, True)
        self.assertIsInstance(ended[0].finished_at.year, int)

    def test_array_and_dependency(self):
        first = self.client.submit("echo task $CORRAL_ARRAY_TASK_ID", gpus=1, array="0-3", name="arr")
        self.assertTrue(first.array_job_id)
        after = self.client.submit("echo after", gpus=0, depends_on=[first.array_job_id])
        self.assertEqual(after.depends_on, "afterok:" + first.array_job_id)
        done = self.client.wait(after, timeout=60, poll=0.5)
        self.assertEqual(done.state, "completed", done.message)
        arr = self.client.array(first.array_job_id)
        self.assertIsInstance(arr, models.Array)
        self.assertEqual((arr.state, arr.task_count), ("completed", 4))

    def test_logs_follow_and_tail(self):
        job = self.client.submit("for i in 1 2 3 4 5; do echo line $i; sleep 0.2; done", gpus=0)
        lines = list(self.client.logs(job, follow=True))
        self.assertEqual(lines, ["line %d\n" % i for i in range(1, 6)])
        self.assertEqual(self.client.logs(job, tail=2), "line 4\nline 5\n")
        self.assertEqual(list(self.client.logs(job, follow=True, tail=1)), ["line 5\n"])

    def test_cancel(self):
        job = self.client.submit("sleep 300", gpus=1, name="long")
        deadline = time.monotonic() + 30
        while self.client.get(job).state != "running" and time.monotonic() < deadline:
            time.sleep(0.1)  # poll interval
        self.client.cancel(job, grace="1s")
        self.assertEqual(self.client.wait(job, timeout=30, poll=0.5).state, "canceled")

    def test_errors(self):
        with self.assertRaises(corral.NotFound) as cm:
            self.client.get("j-no-such-job")
        self.assertEqual(cm.exception.code, "not_found")
        with self.assertRaises(corral.InvalidField) as cm:
            self.client.submit("true", gpus=-1)
        self.assertEqual(cm.exception.field, "gpu_count")
        with self.assertRaises(corral.BadRequest) as cm:
            self.client.submit("true", no_such_field=1)
        self.assertEqual((cm.exception.code, cm.exception.field), ("unknown_field", "no_such_field"))

    def test_listings_and_events(self):
        job = self.client.submit("true", gpus=0, name="listed")
        self.client.wait(job, timeout=30, poll=0.3)
        listed = self.client.jobs(name="listed")
        self.assertIn(job.id, [j.id for j in listed])
        self.assertIsInstance(self.client.queue(), models.QueueResponse)
        self.assertIsInstance(self.client.cluster(), models.ClusterStatus)
        self.assertEqual(self.client.whoami().role, "admin")
        events = self.client.events()
        first = next(events)
        events.close()
        self.assertEqual(first.event, "update")
        self.assertIsInstance(first.data, models.DashboardUpdate)

    @unittest.skipUnless(os.environ.get("CORRAL_TEST_INSTALLED") == "1", "testing the source tree")
    def test_installed_package(self):
        src = os.path.dirname(HERE)
        self.assertFalse(os.path.abspath(corral.__file__).startswith(src + os.sep), corral.__file__)

    def test_models_match_live_document(self):
        schemas = self.client.openapi()["components"]["schemas"]
        for name, model in models.MODELS.items():
            self.assertEqual(set(model.field_names()), set(schemas[name]["properties"]), name)

    def test_seed_fields_on_a_queued_job(self):
        blocker = self.client.submit("sleep 300", gpus=8, name="blocker")
        waiting = self.client.submit("true", gpus=8, name="waits", priority="high", max_retries=2)
        try:
            j = self.client.get(waiting)
            self.assertEqual((j.gpu_count, j.priority, j.max_retries, j.retry_count), (8, "high", 2, 0))
            self.assertTrue(j.policy)
            self.assertIsNotNone(j.submitted_at)
        finally:
            self.client.cancel(waiting)
            self.client.cancel(blocker, grace="1s")


if __name__ == "__main__":
    unittest.main()
