"""The Python client against a real daemon's published filter.

tests/pyclient.test starts the daemon and sets, for these tests:
  BLOOMGUARD_TEST_FILTER     the published file (<publish_dir>/default.bgf)
  BLOOMGUARD_TEST_URL        the daemon (http://127.0.0.1:PORT)
  BLOOMGUARD_TEST_PID        its process id (SIGSTOP makes it stale, SIGTERM withdraws)
  BLOOMGUARD_TEST_ROWS       the table holds the text ids 1..ROWS
  BLOOMGUARD_TEST_STALENESS  its [sync] max_staleness, seconds
The tests run in name order; the last one stops the daemon.
"""

import json
import os
import random
import signal
import tempfile
import threading
import time
import unittest
import urllib.request

import bloomguard
from bloomguard import Answer

ENV = os.environ
HAVE_DAEMON = "BLOOMGUARD_TEST_FILTER" in ENV


def http(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(ENV["BLOOMGUARD_TEST_URL"] + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, json.loads(r.read() or b"null")


def daemon_exists(ids):
    """The daemon's answers (POST /exists) for ids, in order."""
    out = []
    for i in range(0, len(ids), 1000):
        _, body = http("POST", "/exists", {"ids": ids[i:i + 1000]})
        out += body["exists"]
    return out


def wait_for(what, seconds, cond):
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("%s: not within %s s" % (what, seconds))
        time.sleep(0.05)


@unittest.skipUnless(HAVE_DAEMON, "BLOOMGUARD_TEST_FILTER is not set (tests/pyclient.test sets it)")
class TestPublishedFilter(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.path = ENV["BLOOMGUARD_TEST_FILTER"]
        cls.rows = int(ENV["BLOOMGUARD_TEST_ROWS"])
        cls.stale = float(ENV["BLOOMGUARD_TEST_STALENESS"])
        cls.pid = int(ENV["BLOOMGUARD_TEST_PID"])
        cls.f = bloomguard.Filter(cls.path)
        # Absent ids the filter surely rejects now (false positives left out).
        cls.absent = [i for i in ("py-absent-%d" % n for n in range(2000))
                      if cls.f.lookup(i) is Answer.ABSENT][:100]

    @classmethod
    def tearDownClass(cls):
        cls.f.close()

    def test_1_info(self):
        info = self.f.info()
        self.assertEqual(info.error, "OK", info.why)
        self.assertEqual(info.name, "default")
        self.assertEqual(info.spelling, "text")
        self.assertGreaterEqual(info.generation, 1)
        self.assertGreaterEqual(info.layers, 1)
        self.assertEqual(info.max_staleness, self.stale)
        self.assertEqual(info.pid, self.pid)
        self.assertFalse(info.degraded)
        self.assertFalse(info.saturated)
        self.assertGreaterEqual(info.horizon_age, 0)
        self.assertRegex(bloomguard.library_version(), r"^\d+\.\d+\.\d+")

    def test_2_agrees_with_the_daemon(self):
        ids = [str(i) for i in random.sample(range(1, self.rows + 1), 2000)]
        ids += ["py-%d" % n for n in range(3000)] + ["a b", "x/y", "\u00fc", "  7  "]
        ours = [self.f.lookup(i) for i in ids]
        theirs = daemon_exists(ids)
        wrong = [(i, a, t) for i, a, t in zip(ids, ours, theirs) if (a is Answer.MAYBE) != t]
        self.assertEqual(wrong, [], "lookups that differ from POST /exists")
        self.assertEqual(set(ours[:2000]), {Answer.MAYBE}, "a present id answered otherwise")
        self.assertGreater(ours[2000:5000].count(Answer.ABSENT), 2900, "too few absent")
        self.assertGreater(len(self.absent), 90)

    def test_3_str_bytes_and_buffers(self):
        for i in ("1", "\u00fc", "py-absent-0"):
            b = i.encode()
            self.assertIs(self.f.lookup(i), self.f.lookup(b))
            self.assertIs(self.f.lookup(bytearray(b)), self.f.lookup(b))
            self.assertIs(self.f.lookup(memoryview(b)), self.f.lookup(b))
        self.assertTrue(self.f.absent(self.absent[0]))
        self.assertFalse(self.f.absent("1"))
        with self.assertRaises(TypeError):
            self.f.lookup(42)

    def test_4_a_posted_id_is_maybe_at_once(self):
        posted = self.absent[1]
        self.assertIs(self.f.lookup(posted), Answer.ABSENT)
        status, _ = http("POST", "/ids", {"ids": [posted]})
        self.assertEqual(status, 200)
        self.assertIs(self.f.lookup(posted), Answer.MAYBE)

    def test_5_threads_share_one_filter(self):
        present = [str(i).encode() for i in range(1, min(self.rows, 500) + 1)]
        absent = [i.encode() for i in self.absent[2:]]
        bad = []

        def work():
            for _ in range(20):
                bad.extend(i for i in present if self.f.lookup(i) is not Answer.MAYBE)
                bad.extend(i for i in absent if self.f.lookup(i) is not Answer.ABSENT)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(bad, [])

    def test_6_a_rebuild_supersedes_the_file(self):
        # A second handle that maps the generation before the rebuild.
        with bloomguard.Filter(self.path) as old:
            g0 = old.info().generation
            status, _ = http("POST", "/reload")
            self.assertIn(status, (200, 202))
            present = [str(i) for i in range(1, min(self.rows, 200) + 1)]
            wrong = []

            def moved():
                wrong.extend(i for i in present if old.lookup(i) is not Answer.MAYBE)
                return old.info().generation > g0
            wait_for("the handle follows the rebuild to a new generation", 60, moved)
            self.assertEqual(wrong, [], "present ids answered otherwise during the rebuild")
            self.assertIs(old.lookup(self.absent[2]), Answer.ABSENT)
            self.assertEqual(self.f.info().generation, old.info().generation)

    def test_7_a_stopped_daemon_makes_it_degraded(self):
        probe = self.absent[3]
        self.assertIs(self.f.lookup(probe), Answer.ABSENT)
        os.kill(self.pid, signal.SIGSTOP)
        try:
            time.sleep(self.stale + 1)
            self.assertIs(self.f.lookup(probe), Answer.DEGRADED)
            self.assertFalse(self.f.absent(probe))
            self.assertIs(self.f.lookup("1"), Answer.MAYBE)
            info = self.f.info()
            self.assertTrue(info.degraded)
            self.assertGreater(info.horizon_age, self.stale)
        finally:
            os.kill(self.pid, signal.SIGCONT)
        wait_for("absent again after SIGCONT", 15, lambda: self.f.lookup(probe) is Answer.ABSENT)

    def test_8_no_file(self):
        d = tempfile.mkdtemp()
        missing = os.path.join(d, "not-yet.bgf")
        with self.assertRaises(bloomguard.BloomguardError) as e:
            bloomguard.Filter(missing)
        self.assertEqual(e.exception.code, "ENOENT")
        with bloomguard.Filter(missing, missing_ok=True) as f:
            self.assertIs(f.lookup("1"), Answer.NOT_READY)
            self.assertFalse(f.absent("1"))
            self.assertEqual(f.info().error, "ENOENT")
        with self.assertRaises(bloomguard.BloomguardError) as e:
            bloomguard.Filter("relative/default.bgf")
        self.assertEqual(e.exception.code, "EINVAL")
        junk = os.path.join(d, "junk.bgf")
        with open(junk, "wb") as j:
            j.write(os.urandom(8192))
        with self.assertRaises(bloomguard.BloomguardError) as e:
            bloomguard.Filter(junk, missing_ok=True)
        self.assertEqual(e.exception.code, "EFORMAT")
        f = bloomguard.Filter(self.path)
        f.close()
        f.close()
        with self.assertRaises(ValueError):
            f.lookup("1")

    def test_9_an_exited_daemon_withdraws_it(self):
        probe = self.absent[4]
        self.assertIs(self.f.lookup(probe), Answer.ABSENT)
        os.kill(self.pid, signal.SIGTERM)
        wait_for("the file is withdrawn", 15, lambda: not os.path.exists(self.path))
        self.assertIs(self.f.lookup(probe), Answer.NOT_READY)
        self.assertFalse(self.f.absent(probe))
        self.assertNotEqual(self.f.info().error, "OK")


if __name__ == "__main__":
    unittest.main()
