#!/usr/bin/env python3
"""Timed probes of verified-absent IDs through a tree of replicas, for
tests/adaptive_tree.test (issue 35, item 4).  Standard library only.

  treeprobe.py delay UP TOKEN IDS NODE...
      For each ID of the file IDS in turn: POST /absent/default on the
      upstream UP (Bearer TOKEN), then ask GET /exists/ID of UP and of every
      NODE (replicas) round-robin on kept-alive connections until each
      answers 404; the delay of a node is its first 404 minus the upstream's
      (verified on UP -> denied on the replica; one poll round, whose
      median time is printed, is the resolution).  Prints one JSON object:
      per node p50, p99, max (seconds) and how many IDs never got there,
      and for all from the report's answer (the verification included).

  treeprobe.py storm UP TOKEN IDS STALE NODE...
      For each ID in turn: POST /absent/default on UP (it is verified
      there), then, after 0-40 ms, INSERT it into users (one psql session,
      its stdin; the time its \\echo comes back is after the commit), so that
      inserts land before, during and after the verifications.  Meanwhile
      a thread asks every NODE POST /exists for all the IDs, again and again,
      until STALE + 2 s after the last commit.  Prints one JSON object: per
      node how many IDs it ever denied, how many answers were wrong (absent
      more than STALE seconds after the ID's commit: the contract's 404 that
      must never be), the wrong ones, and the latest time from a commit to
      the node's last absent answer of that ID.

  treeprobe.py insert STALE NODE... -- ID
      The same watch for one ID inserted (no report): how it ends on each
      node, polled during the insert.
"""
import http.client
import json
import random
import subprocess
import sys
import threading
import time
import urllib.parse


def conn_of(url):
    u = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=10)


class Node:
    def __init__(self, url):
        self.url = url
        self.c = conn_of(url)

    def request(self, method, path, body=None, headers=None):
        for attempt in range(2):
            try:
                self.c.request(method, path, body=body, headers=headers or {})
                r = self.c.getresponse()
                data = r.read()
                return r.status, data
            except (http.client.HTTPException, OSError):
                self.c.close()
                self.c = conn_of(self.url)
                if attempt == 1:
                    raise
        return None, None

    def exists(self, ident):
        return self.request("GET", "/exists/" + urllib.parse.quote(ident, safe=""))[0]

    def exists_many(self, ids):
        st, data = self.request("POST", "/exists", json.dumps({"ids": ids}),
                                {"Content-Type": "application/json"})
        if st != 200:
            return None
        return json.loads(data)["exists"]


def report(up, token, ident):
    st, data = up.request("POST", "/absent/default", json.dumps({"ids": [ident]}),
                          {"Content-Type": "application/json",
                           "Authorization": "Bearer " + token})
    if st not in (200, 202):
        raise SystemExit("POST /absent on the upstream: %s %s" % (st, data))


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    k = max(0, min(len(xs) - 1, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return xs[k]


def delay(args):
    up_url, token, ids_file = args[0], args[1], args[2]
    nodes = [Node(u) for u in args[3:]]
    up = Node(up_url)
    ids = [l.strip() for l in open(ids_file) if l.strip()]
    delays = [[] for _ in nodes]
    since = [[] for _ in nodes]         # from the report's answer: verification included
    up_since = []
    rounds = []                         # one poll round's time: the resolution
    missed = [0 for _ in nodes]
    up_missed = 0
    for ident in ids:
        report(up, token, ident)
        t_report = time.monotonic()
        t_up = None
        t_node = [None for _ in nodes]
        deadline = t_report + 8
        while time.monotonic() < deadline:
            r0 = time.monotonic()
            if t_up is None and up.exists(ident) == 404:
                t_up = time.monotonic()
            for i, n in enumerate(nodes):
                if t_node[i] is None and n.exists(ident) == 404:
                    t_node[i] = time.monotonic()
            rounds.append(time.monotonic() - r0)
            if t_up is not None and all(t is not None for t in t_node):
                break
        if t_up is None:
            up_missed += 1
            continue
        up_since.append(t_up - t_report)
        for i, t in enumerate(t_node):
            if t is None:
                missed[i] += 1
            else:
                # Seen on the replica first within one round: below the resolution, 0.
                delays[i].append(max(0.0, t - t_up))
                since[i].append(t - t_report)
    out = {"ids": len(ids), "upstream_never_denied": up_missed,
           "poll_round_p50": pct(rounds, 50),
           "upstream_from_report": {"p50": pct(up_since, 50), "p99": pct(up_since, 99)},
           "nodes": []}
    for i, n in enumerate(nodes):
        d = delays[i]
        out["nodes"].append({"url": n.url, "n": len(d), "missed": missed[i],
                             "p50": pct(d, 50), "p99": pct(d, 99),
                             "max": max(d) if d else None,
                             "from_report": {"p50": pct(since[i], 50),
                                             "p99": pct(since[i], 99)}})
    print(json.dumps(out))


class Watch(threading.Thread):
    """Asks every node for all the IDs until told to stop; keeps each answer."""

    def __init__(self, urls, ids):
        super().__init__(daemon=True)
        self.nodes = [Node(u) for u in urls]
        self.ids = ids
        self.stop = threading.Event()
        self.seen = [[] for _ in self.nodes]   # per node: (time, [bool...])
        self.errors = 0

    def run(self):
        while not self.stop.is_set():
            for i, n in enumerate(self.nodes):
                try:
                    ans = n.exists_many(self.ids)
                except (http.client.HTTPException, OSError):
                    ans = None
                t = time.monotonic()
                if ans is None:
                    self.errors += 1
                else:
                    self.seen[i].append((t, ans))


def judge(w, ids, committed, stale):
    out = {"nodes": [], "asks_failed": w.errors}
    for i, n in enumerate(w.nodes):
        denied = set()
        wrong = []
        last_absent = {}
        for t, ans in w.seen[i]:
            for k, present in enumerate(ans):
                if present:
                    continue
                ident = ids[k]
                denied.add(ident)
                c = committed.get(ident)
                if c is not None and t >= c:
                    last_absent[ident] = max(last_absent.get(ident, 0.0), t - c)
                if c is not None and t > c + stale:
                    wrong.append([ident, round(t - c, 3)])
        out["nodes"].append({"url": n.url, "asks": len(w.seen[i]), "ever_denied": len(denied),
                             "denied_after_commit": len(last_absent),
                             "latest_absent_after_commit": max(last_absent.values())
                             if last_absent else 0.0,
                             "wrong": len(wrong), "wrong_examples": wrong[:10]})
    return out


class Inserter:
    def __init__(self):
        self.p = subprocess.Popen(["psql", "-qXAt", "-v", "ON_ERROR_STOP=1"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  universal_newlines=True, bufsize=1)

    def insert(self, ident):
        self.p.stdin.write("INSERT INTO users VALUES ('%s', 'tree');\n\\echo c\n" % ident)
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if line.strip() != "c":
            raise SystemExit("psql: the insert of %s did not commit" % ident)
        return time.monotonic()

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def storm(args):
    up_url, token, ids_file, stale = args[0], args[1], args[2], float(args[3])
    urls = args[4:]
    ids = [l.strip() for l in open(ids_file) if l.strip()]
    up = Node(up_url)
    w = Watch(urls, ids)
    w.start()
    time.sleep(0.2)
    ins = Inserter()
    committed = {}
    rnd = random.Random(35)
    for ident in ids:
        report(up, token, ident)
        time.sleep(rnd.uniform(0, 0.04))
        committed[ident] = ins.insert(ident)
        time.sleep(rnd.uniform(0, 0.03))
    ins.close()
    time.sleep(stale + 2)
    w.stop.set()
    w.join()
    print(json.dumps(judge(w, ids, committed, stale)))


def insert_one(args):
    sep = args.index("--")
    stale, urls, ident = float(args[0]), args[1:sep], args[sep + 1]
    w = Watch(urls, [ident])
    w.start()
    time.sleep(0.3)
    ins = Inserter()
    committed = {ident: ins.insert(ident)}
    ins.close()
    time.sleep(stale + 1.5)
    w.stop.set()
    w.join()
    out = judge(w, [ident], committed, stale)
    # When each node first answered 200 after the commit (the insert reached it).
    for i, node in enumerate(out["nodes"]):
        first = None
        for t, ans in w.seen[i]:
            if t >= committed[ident] and ans[0]:
                first = round(t - committed[ident], 3)
                break
        node["first_present_after_commit"] = first
        node["denied_before_commit"] = any(t < committed[ident] and not ans[0]
                                           for t, ans in w.seen[i])
    print(json.dumps(out))


if __name__ == "__main__":
    mode, rest = sys.argv[1], sys.argv[2:]
    {"delay": delay, "storm": storm, "insert": insert_one}[mode](rest)
