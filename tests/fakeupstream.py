#!/usr/bin/env python3
"""A hostile upstream for tests/fleethostile.test (issue 34): it stands
between a replica and a real upstream bloomguard, passes GET
/replicate/NAME/snapshot and /horizon through untouched (the replica loads a
real snapshot and is told the truth about freshness), and breaks the stream,
GET /replicate/NAME, the way the file MODEFILE says at each new request:

  pass        the real stream, untouched
  garbage     200, chunked, then random bytes
  truncated   the real stream cut in the middle of its HELLO
  trickle     the real stream at one byte every 0.3 s
  oversized   the real preamble and HELLO, then a frame head announcing 2 GiB
  skip        the real stream without its first ADDS frame: keys skipped
  otherhello  the real stream, its HELLO rewritten to another table (its
              check recomputed, so only the meaning is wrong)

  fakeupstream.py PORTFILE UPSTREAM-PORT MODEFILE [PORT]

It listens on 127.0.0.1 (PORT, or a free port; written to PORTFILE) and logs
one line a request on stderr."""
import http.client
import http.server
import os
import socketserver
import struct
import sys
import time

M = 0xFFFFFFFF
P1, P2, P3, P4, P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393


def rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & M


def xxh32(data, seed=0):
    """XXH32, the check of a stream frame (src/fleet/fleetwire.h)."""
    n, i = len(data), 0
    if n >= 16:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed & M, (seed - P1) & M]
        while i + 16 <= n:
            for k in range(4):
                lane = struct.unpack_from("<I", data, i + 4 * k)[0]
                v[k] = (rotl((v[k] + lane * P2) & M, 13) * P1) & M
            i += 16
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while i + 4 <= n:
        h = (h + struct.unpack_from("<I", data, i)[0] * P3) & M
        h = (rotl(h, 17) * P4) & M
        i += 4
    while i < n:
        h = (h + data[i] * P5) & M
        h = (rotl(h, 11) * P1) & M
        i += 1
    h ^= h >> 15
    h = (h * P2) & M
    h ^= h >> 13
    h = (h * P3) & M
    h ^= h >> 16
    return h


class Frames:
    """Splits the real stream into its preamble and whole frames."""

    def __init__(self, resp):
        self.resp, self.buf = resp, b""

    def take(self, n):
        while len(self.buf) < n:
            more = self.resp.read1(65536)
            if not more:
                return None
            self.buf += more
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def preamble(self):
        return self.take(12)

    def frame(self):
        head = self.take(8)
        if head is None:
            return None
        body = self.take(struct.unpack_from("<I", head, 4)[0] + 4)
        return None if body is None else head + body


def other_table(frame):
    """A HELLO whose table is 'orders', the check made right again."""
    p = frame[8:-4]
    at, strings = 96, []
    for _ in range(6):
        n = struct.unpack_from("<H", p, at)[0]
        strings.append(p[at + 2:at + 2 + n])
        at += 2 + n
    strings[1] = b"orders"
    payload = p[:96] + b"".join(struct.pack("<H", len(s)) + s for s in strings)
    head = bytes([frame[0], 0, 0, 0]) + struct.pack("<I", len(payload))
    return head + payload + struct.pack("<I", xxh32(head + payload))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("fake: " + (fmt % args) + "\n")

    def upstream(self):
        c = http.client.HTTPConnection("127.0.0.1", self.server.up_port, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() == "authorization"}
        c.request("GET", self.path, headers=headers)
        return c, c.getresponse()

    def chunk(self, data):
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def do_GET(self):
        c, r = self.upstream()
        route = self.path.split("?")[0]
        stream = route.startswith("/replicate/") and route.count("/") == 2
        if not stream or r.status != 200:
            body = r.read()
            self.send_response(r.status)
            self.send_header("Content-Type", r.getheader("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            c.close()
            return
        with open(self.server.mode_file) as f:
            mode = f.read().strip()
        sys.stderr.write("fake: stream in mode %s\n" % mode)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-bloomguard-replication")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        fr = Frames(r)
        try:
            if mode == "garbage":
                for _ in range(20):
                    self.chunk(os.urandom(512))
                    time.sleep(0.05)
                return
            pre, hello = fr.preamble(), fr.frame()
            if pre is None or hello is None:
                return
            if mode == "truncated":
                self.chunk(pre + hello[:len(hello) // 2])
                return
            if mode == "otherhello":
                hello = other_table(hello)
            if mode == "trickle":
                for b in pre + hello:
                    self.chunk(bytes([b]))
                    time.sleep(0.3)
            else:
                self.chunk(pre + hello)
            if mode == "oversized":
                self.chunk(bytes([2, 0, 0, 0]) + struct.pack("<I", 1 << 31))
                time.sleep(1)
                return
            skipped = False
            while True:
                f = fr.frame()
                if f is None:
                    return
                if mode == "skip" and f[0] == 2 and not skipped:
                    skipped = True
                    continue
                if mode == "trickle":
                    for b in f:
                        self.chunk(bytes([b]))
                        time.sleep(0.3)
                else:
                    self.chunk(f)
        except (BrokenPipeError, ConnectionResetError):
            return
        finally:
            c.close()
            try:
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    port_file, up_port, mode_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    Server.allow_reuse_address = True
    s = Server(("127.0.0.1", int(sys.argv[4]) if len(sys.argv) > 4 else 0), Handler)
    s.up_port, s.mode_file = up_port, mode_file
    with open(port_file + ".tmp", "w") as f:
        f.write(str(s.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    s.serve_forever()


if __name__ == "__main__":
    main()
